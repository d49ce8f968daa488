package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// "Only JSON crosses the guest boundary, in both directions", and "the host survives
// every guest failure": whatever run returns, Run hands back exact JSON or a typed
// *Error with a stable code (and, for not_json, the path of the offender), never a
// crash, a hang or a value silently changed; the engine stays usable after each.
// A hostile value (throwing getters and traps, side effects, toJSON, exotic objects,
// sizes and depths past the bounds) is checked by the prelude's own JSON writer,
// which reads each property once and calls no toJSON.
func TestHostileResults(t *testing.T) {
	e := hostTestEngine(t)
	for _, c := range []struct {
		rule, program string
		// value is the exact JSON text returned; otherwise code, limit and path are
		// the failure's, and msg a part of its message.
		value             string
		code, limit, path string
		msg               string
	}{
		{rule: "a getter that throws fails the call with its error",
			program: `function run() { return {a: 1, get b() { throw new TypeError("getter"); }}; }`,
			code:    CodeJSError, msg: "TypeError: getter"},
		{rule: "a getter is read once, and what it changes later is not written: the keys are taken first",
			program: `function run() { const o = {b: 1}; Object.defineProperty(o, "a", {enumerable: true, get() { o.c = 3; o.b = 2; return 1; }}); return o; }`,
			value:   `{"b":1,"a":1}`},
		{rule: "a getter that deletes a member not yet written leaves undefined there, which is not JSON",
			program: `function run() { const o = {get a() { delete o.b; return 1; }, b: 2}; return o; }`,
			code:    CodeNotJSON, path: "$.b", msg: "undefined is not JSON"},
		{rule: "a getter that shortens its array leaves a hole, which is not JSON",
			program: `function run() { const a = [0, 1, 2]; Object.defineProperty(a, 0, {get() { a.length = 1; return 0; }}); return a; }`,
			code:    CodeNotJSON, path: "$[1]", msg: "hole"},
		{rule: "a getter that builds values without end hits the stack bound",
			program: `function mk() { return {get a() { return mk(); }}; } function run() { return mk(); }`,
			code:    CodeLimitExceeded, limit: LimitStack},
		{rule: "a Proxy whose trap throws fails the call with the trap's error",
			program: `function run() { return new Proxy({}, {ownKeys() { throw new Error("trap"); }}); }`,
			code:    CodeJSError, msg: "Error: trap"},
		{rule: "a Proxy whose getPrototypeOf trap throws fails the call",
			program: `function run() { return {p: new Proxy({}, {getPrototypeOf() { throw new Error("proto trap"); }})}; }`,
			code:    CodeJSError, msg: "proto trap"},
		{rule: "a Proxy that reports a key twice is refused by the engine, never written twice",
			program: `function run() { return new Proxy({}, {ownKeys: () => ["a", "a"], getOwnPropertyDescriptor: () => ({value: 1, enumerable: true, configurable: true}), get: () => 1}); }`,
			code:    CodeJSError, msg: "duplicate property"},
		{rule: "a revoked Proxy fails the call",
			program: `function run() { const r = Proxy.revocable({}, {}); r.revoke(); return [r.proxy]; }`,
			code:    CodeJSError, msg: "TypeError"},
		{rule: "a Proxy of a plain object is written as the values its traps give",
			program: `function run() { return new Proxy({a: 1}, {get: (t, k) => k === "a" ? "seen" : undefined}); }`,
			value:   `{"a":"seen"}`},
		{rule: "toJSON is never called: a plain object's toJSON is a function member, which is not JSON",
			program: `function run() { return {x: 1, toJSON() { throw new Error("never called"); }}; }`,
			code:    CodeNotJSON, path: "$.toJSON", msg: "a function is not JSON"},
		{rule: "toJSON is never called: a class instance with one is not JSON",
			program: `class C { toJSON() { return {odd: undefined, n: 1n}; } } function run() { return {c: new C()}; }`,
			code:    CodeNotJSON, path: "$.c", msg: "an instance of C"},
		{rule: "a thenable whose then getter throws fails the call",
			program: `function run() { return {get then() { throw new Error("then"); }}; }`,
			code:    CodeJSError, msg: "Error: then"},
		{rule: "a cycle is not JSON, at the member that closes it",
			program: `function run() { const o = {a: [1]}; o.a.push(o); return o; }`,
			code:    CodeNotJSON, path: "$.a[1]", msg: "cycle"},
		{rule: "a value reached twice without a cycle is written twice",
			program: `function run() { const o = {x: 1}; return [o, o]; }`,
			value:   `[{"x":1},{"x":1}]`},
		{rule: "BigInt is not JSON",
			program: `function run() { return {n: 2n ** 64n}; }`,
			code:    CodeNotJSON, path: "$.n", msg: "a BigInt is not JSON"},
		{rule: "-0 is written 0, as JSON.stringify writes it: the same JSON number",
			program: `function run() { return [-0, 0 * -1]; }`,
			value:   `[0,0]`},
		{rule: "NaN is not JSON",
			program: `function run() { return {n: 0 / 0}; }`,
			code:    CodeNotJSON, path: "$.n", msg: "NaN is not a finite number"},
		{rule: "-Infinity is not JSON",
			program: `function run() { return [1, -1 / 0]; }`,
			code:    CodeNotJSON, path: "$[1]", msg: "-Infinity is not a finite number"},
		{rule: "undefined is not JSON, at the root or in a member (JSON.stringify would drop it)",
			program: `function run() { return {a: undefined}; }`,
			code:    CodeNotJSON, path: "$.a", msg: "undefined is not JSON"},
		{rule: "a function is not JSON",
			program: `function run() { return [() => 1]; }`,
			code:    CodeNotJSON, path: "$[0]", msg: "a function is not JSON"},
		{rule: "a symbol is not JSON",
			program: `function run() { return {s: Symbol("s")}; }`,
			code:    CodeNotJSON, path: "$.s", msg: "a symbol is not JSON"},
		{rule: "a symbol-keyed property is not JSON",
			program: `function run() { return {o: {[Symbol("k")]: 1}}; }`,
			code:    CodeNotJSON, path: "$.o", msg: "a symbol-keyed property is not JSON"},
		{rule: "a hole in a sparse array is not JSON",
			program: `function run() { return [1, , 3]; }`,
			code:    CodeNotJSON, path: "$[1]", msg: "hole"},
		{rule: "an array subclass is not a plain array",
			program: `class A extends Array {} function run() { return A.of(1); }`,
			code:    CodeNotJSON, path: "$", msg: "an instance of A"},
		{rule: "numbers are written as the shortest text of their double",
			program: `function run() { return [2 ** 53 + 2, 0.1 + 0.2, 5e-324, 1e21, -1.5e-7]; }`,
			value:   `[9007199254740994,0.30000000000000004,5e-324,1e+21,-1.5e-7]`},
		{rule: "a __proto__ key of a parsed object is an own member and is written",
			program: `function run(args) { return args; }`,
			value:   `{"__proto__":{"x":1}}`},
		{rule: "a 100 MB string hits the memory bound as a typed error",
			program: `function run() { return "x".repeat(1e8); }`,
			code:    CodeLimitExceeded, limit: LimitMemory},
		{rule: "a result nested 1e5 deep hits the stack bound as a typed error",
			program: `function run() { let v = []; for (let i = 0; i < 1e5; i++) v = [v]; return v; }`,
			code:    CodeLimitExceeded, limit: LimitStack},
		{rule: "an object nested 1e5 deep hits the stack bound as a typed error",
			program: `function run() { let v = {}; for (let i = 0; i < 1e5; i++) v = {a: v}; return {v}; }`,
			code:    CodeLimitExceeded, limit: LimitStack},
		{rule: "a thrown value that cannot even be described is still a typed error",
			program: `function run() { throw new Proxy({}, {get() { throw 1; }, getPrototypeOf() { throw 2; }}); }`,
			code:    CodeJSError, msg: "could not be described"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			args := `{}`
			if strings.Contains(c.rule, "__proto__") {
				args = `{"__proto__":{"x":1}}`
			}
			res, err := e.Run(hostCtx(t), c.program, json.RawMessage(args), nil, Options{})
			if c.value != "" {
				if err != nil {
					t.Fatalf("error %v, want the value %s", err, c.value)
				}
				if string(res.Value) != c.value || res.Doc.Text() != c.value {
					t.Fatalf("value %s (Doc %s), want %s", res.Value, res.Doc.Text(), c.value)
				}
			} else {
				we := wantError(t, err, c.code, c.limit)
				if we.Path != c.path {
					t.Errorf("path %q, want %q", we.Path, c.path)
				}
				if !strings.Contains(we.Message, c.msg) {
					t.Errorf("message %q does not say %q", we.Message, c.msg)
				}
				if res == nil || res.Value != nil {
					t.Errorf("a failed call returns a Result without a Value, got %+v", res)
				}
			}
			checkHealthy(t, e)
		})
	}
}

// A string with a lone surrogate is JSON that JSON.stringify writes as an escape, but
// not exact JSON: it comes back as the guest's text without a Doc, and its exact
// decoding fails as invalid UTF-8, so that the caller refuses it (the kernel settles
// it as output_invalid, the validator as not_json); it is never changed into U+FFFD.
func TestHostileResultLoneSurrogate(t *testing.T) {
	e := hostTestEngine(t)
	for program, want := range map[string]string{
		`function run() { return "a\ud800"; }`:                  `"a\ud800"`,
		`function run() { return {["\udc00"]: 1}; }`:            `{"\udc00":1}`,
		`function run() { return ["\ud83d\ude00", "\ud83d"]; }`: `["😀","\ud83d"]`,
	} {
		res := mustRun(t, e, program, `{}`, nil, Options{})
		if string(res.Value) != want || !res.Doc.IsZero() {
			t.Fatalf("%s: value %s (Doc %q), want %s and no Doc", program, res.Value, res.Doc.Text(), want)
		}
		var je *jsonexact.Error
		if _, err := jsonexact.Decode(res.Value, 0); !errors.As(err, &je) || je.Problem != jsonexact.InvalidUTF8 {
			t.Fatalf("%s: exact decoding says %v, want invalid UTF-8", program, err)
		}
	}
}

// The syscall arguments a guest sends are written by the same checker: what is not
// JSON is refused in the guest with syscall_args_invalid and its path, before the host
// is called, and a getter or trap that throws rejects the syscall's Promise with its
// own error; the program can catch either. Arguments the Syscaller receives are JSON.
func TestHostileSyscallArgs(t *testing.T) {
	e := hostTestEngine(t)
	for _, c := range []struct {
		rule, args string
		want       string // what the program returns: the rejection's code and message, or "sent"
	}{
		{"BigInt", `{n: 1n}`, `syscall_args_invalid: libos.syscall: args at $.n: a BigInt is not JSON`},
		{"a cycle", `(() => { const o = {}; o.o = o; return o; })()`, `syscall_args_invalid: libos.syscall: args at $.o: a cycle is not JSON`},
		{"NaN", `[NaN]`, `syscall_args_invalid: libos.syscall: args at $[0]: NaN is not a finite number`},
		{"undefined in a member", `{a: undefined}`, `syscall_args_invalid: libos.syscall: args at $.a: undefined is not JSON`},
		{"a function", `{f() {}}`, `syscall_args_invalid: libos.syscall: args at $.f: a function is not JSON`},
		{"a sparse array", `[1, , 2]`, `syscall_args_invalid: libos.syscall: args at $[1]: a hole in a sparse array is not JSON`},
		{"a class instance", `{d: new Date(0)}`, `syscall_args_invalid: libos.syscall: args at $.d: an instance of Date is not JSON`},
		{"a getter that throws", `{get a() { throw new Error("getter"); }}`, `undefined: getter`},
		{"a Proxy trap that throws", `new Proxy({}, {ownKeys() { throw new Error("trap"); }})`, `undefined: trap`},
		{"1e5 levels deep", `(() => { let v = []; for (let i = 0; i < 1e5; i++) v = [v]; return v; })()`, `undefined: Maximum call stack size exceeded`},
		{"-0, which is sent as 0", `{z: -0}`, `sent {"z":0}`},
	} {
		t.Run(c.rule, func(t *testing.T) {
			var sent []string
			sys := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
				sent = append(sent, string(args))
				return json.RawMessage(`null`), nil
			})
			program := `async function run(args, libos) {
				try { await libos.syscall("x", ` + c.args + `); return "sent"; }
				catch (e) { return e.code + ": " + e.message; }
			}`
			res := mustRun(t, e, program, `{}`, sys, Options{})
			got := ""
			if err := json.Unmarshal(res.Value, &got); err != nil {
				t.Fatal(err)
			}
			if got == "sent" && len(sent) == 1 {
				got += " " + sent[0]
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if !strings.HasPrefix(got, "sent") && len(sent) != 0 {
				t.Fatalf("refused arguments reached the Syscaller: %q", sent)
			}
			for _, a := range sent {
				if !json.Valid([]byte(a)) {
					t.Fatalf("the Syscaller received %q, which is not JSON", a)
				}
			}
		})
	}
}
