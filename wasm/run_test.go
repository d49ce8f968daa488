package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/liberr"
)

// "Run(ctx, program, argsJSON, syscaller, limits) → result where program is JavaScript that
// defines run ... the result carries the JSON value".
func TestRunValues(t *testing.T) {
	e := hostTestEngine(t)
	cases := []struct {
		name, program, args, want string
	}{
		{"sync run returns its value as JSON",
			`function run(args) { return {a: 1, b: [true, null, "x"], c: {d: -2.5}}; }`, `{}`,
			`{"a":1,"b":[true,null,"x"],"c":{"d":-2.5}}`},
		{"args arrive as run's first argument, parsed",
			`function run(args) { return args.x * 2; }`, `{"x":21}`, `42`},
		{"nil args mean {}",
			`function run(args) { return Object.keys(args).length; }`, ``, `0`},
		{"an async run is awaited",
			`async function run(args) { const v = await Promise.resolve(args.v); return [v, v]; }`, `{"v":"é"}`, `["é","é"]`},
		{"the value is passed through byte-exact, as JSON.stringify wrote it (no float64 round trip)",
			`function run() { return [0.1 + 0.2, 1e21, 5e-324, -0, 2 ** 53 + 2, 1.5e300]; }`, `{}`,
			`[0.30000000000000004,1e+21,5e-324,0,9007199254740994,1.5e+300]`},
		{"strings keep their escapes",
			`function run() { return "a\"b\\c\n\u2028\ud83d\ude00"; }`, `{}`, "\"a\\\"b\\\\c\\n\u2028\U0001F600\""},
		{"the ES features model-written code uses are present",
			`class A { #x = 1; get x() { return this.#x; } }
			 function* g() { yield 1; yield 2; }
			 async function run() {
			   const {a, ...rest} = {a: 1, b: 2, c: 3};
			   const m = new Map([[1, "one"]]);
			   const re = /(?<y>\d{4})-(?<m>\d{2})/.exec("2024-05").groups;
			   return {a, rest, x: new A().x, gen: [...g()], opt: m.get(2)?.length ?? "none",
			           big: String(2n ** 64n), set: [...new Set([1, 1, 2])], re: re.y + re.m,
			           proxy: new Proxy({}, {get: (_, k) => k}).hello};
			 }`, `{}`,
			`{"a":1,"rest":{"b":2,"c":3},"x":1,"gen":[1,2],"opt":"none","big":"18446744073709551616","set":[1,2],"re":"202405","proxy":"hello"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, e, tc.program, tc.args, nil, Options{})
			if string(res.Value) != tc.want {
				t.Fatalf("Value = %s, want %s", res.Value, tc.want)
			}
		})
	}
}

// Every failure of the program is a typed *Error with a stable code; the engine stays
// usable after each.
func TestRunErrors(t *testing.T) {
	e := hostTestEngine(t)
	cases := []struct {
		name, program, args string
		code, path          string
		msgContains         string
	}{
		{"syntax_error: src does not parse", `function run( {`, `{}`, CodeSyntaxError, "", ""},
		{"run_missing: src defines no function run", `var x = 1;`, `{}`, CodeRunMissing, "", ""},
		{"run_missing: run that is not a function", `var run = 42;`, `{}`, CodeRunMissing, "", ""},
		{"js_error: run threw (message is Name: message)", `function run() { throw new TypeError("boom"); }`, `{}`, CodeJSError, "", "TypeError: boom"},
		{"js_error: its promise rejected", `async function run() { await null; throw new RangeError("late"); }`, `{}`, CodeJSError, "", "RangeError: late"},
		{"not_json: undefined is rejected", `function run() { return undefined; }`, `{}`, CodeNotJSON, "$", ""},
		{"not_json: a function, with its JSON path", `function run() { return {items: [1, 2, {when: () => 1}]}; }`, `{}`, CodeNotJSON, "$.items[2].when", ""},
		{"not_json: class instances (Date)", `function run() { return {d: new Date(0)}; }`, `{}`, CodeNotJSON, "$.d", ""},
		{"not_json: class instances (Map)", `function run() { return [new Map()]; }`, `{}`, CodeNotJSON, "$[0]", ""},
		{"not_json: BigInt", `function run() { return {n: 1n}; }`, `{}`, CodeNotJSON, "$.n", ""},
		{"not_json: NaN", `function run() { return {n: NaN}; }`, `{}`, CodeNotJSON, "$.n", ""},
		{"not_json: Infinity", `function run() { return [Infinity]; }`, `{}`, CodeNotJSON, "$[0]", ""},
		{"not_json: cycles", `function run() { const o = {}; o.self = o; return o; }`, `{}`, CodeNotJSON, "$.self", ""},
		{"not_json: the path quotes a key that is not an identifier", `function run() { return {ok: 1, "a b": [0, {c: [undefined]}]}; }`, `{}`, CodeNotJSON, `$["a b"][1].c[0]`, ""},
		{"not_json: a hole in a sparse array, with its path", `function run() { const a = [1]; a[2] = 3; return {a}; }`, `{}`, CodeNotJSON, "$.a[1]", "sparse"},
		{"unsettled: a Promise that never settles is an error, not a hang", `function run() { return new Promise(() => {}); }`, `{}`, CodeUnsettled, "", ""},
		{"args_invalid: an array", sumProgram, `[1,2]`, CodeArgsInvalid, "", ""},
		{"args_invalid: a scalar", sumProgram, `"x"`, CodeArgsInvalid, "", ""},
		{"args_invalid: malformed JSON", sumProgram, `{"xs":`, CodeArgsInvalid, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(hostCtx(t), tc.program, json.RawMessage(tc.args), nil, Options{})
			we := wantError(t, err, tc.code, "")
			if we.Path != tc.path {
				t.Errorf("Path = %q, want %q", we.Path, tc.path)
			}
			if !strings.Contains(we.Message, tc.msgContains) {
				t.Errorf("Message = %q, want it to contain %q", we.Message, tc.msgContains)
			}
			if !strings.HasPrefix(err.Error(), "wasm: "+tc.code) {
				t.Errorf("Error() = %q, want the package and code first", err.Error())
			}
			if res == nil || res.Value != nil {
				t.Errorf("a failed call returns a Result without a Value, got %+v", res)
			}
			checkHealthy(t, e)
		})
	}
}

// The result is checked and written by the prelude with the built-ins it captured before
// any program ran: a program that replaces Array.prototype's methods still gets its value
// back as JSON, and its offence reported at its path.
func TestRunResultIgnoresReplacedBuiltins(t *testing.T) {
	e := hostTestEngine(t)
	const breakArrays = `for (const m of ["pop", "push", "includes", "join"]) Array.prototype[m] = () => { throw new Error("the program's " + m); };`
	res := mustRun(t, e, `function run() { `+breakArrays+` return {x: [[1, [2]], {y: "z"}], n: null}; }`, `{}`, nil, Options{})
	if string(res.Value) != `{"x":[[1,[2]],{"y":"z"}],"n":null}` {
		t.Errorf("value %s", res.Value)
	}
	_, err := e.Run(hostCtx(t), `function run() { `+breakArrays+` return {x: [[1], {y: () => 1}]}; }`, json.RawMessage(`{}`), nil, Options{})
	if we := wantError(t, err, CodeNotJSON, ""); we.Path != "$.x[1].y" {
		t.Errorf("Path = %q, want $.x[1].y", we.Path)
	}
}

// "A fresh JS runtime/context for every call: no state survives between calls."
func TestRunFreshContext(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	prog := `function run() { globalThis.n = (globalThis.n || 0) + 1; Array.prototype.leak = 1; return [n, [].leak ?? null]; }`
	for i := 0; i < 3; i++ {
		res := mustRun(t, e, prog, `{}`, nil, Options{})
		if string(res.Value) != `[1,1]` {
			t.Fatalf("call %d: %s, want [1,1]: state leaked from an earlier call", i, res.Value)
		}
	}
}

// "A fresh JS runtime/context for every call: no state survives between calls." Every call
// starts from the snapshot taken after the prelude was installed, restored after each
// call. Each program here reports what it sees and then changes it; on one pooled
// instance, every call must see the same thing, whatever the calls before it did and
// however they ended.
func TestRunNoStateSurvives(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	cases := []struct{ name, program string }{
		{"globals: properties, var, let, const, class, functions",
			`var v; let l; const c = 1; class K {}
			 function run() { const r = [typeof globalThis.g, v ?? null, l ?? null, Object.getOwnPropertyNames(globalThis).length];
			   globalThis.g = 1; v = 2; l = 3; globalThis.h = () => 1; return r; }`},
		{"built-in prototypes mutated and frozen",
			`function run() { const r = [typeof Array.prototype.extra, [1,2].map(x => x * 2), "ab".toUpperCase(), ({}).polluted ?? null, Object.isFrozen(Array.prototype)];
			   Array.prototype.extra = 1; Array.prototype.map = () => "hijacked"; String.prototype.toUpperCase = () => "x";
			   Object.prototype.polluted = true; Object.freeze(Array.prototype); return r; }`},
		{"JSON, Math, Promise, Date, Error replaced",
			`function run() { const r = [JSON.stringify({a: 1}), Math.max(1, 2), typeof Promise.prototype.then, new Date(0).toISOString(), String(new Error("m"))];
			   JSON.stringify = () => "no"; Math.max = () => 0; Promise.prototype.then = null; Date.prototype.toISOString = () => "t";
			   Error.prototype.toString = () => "e"; return r; }`},
		{"the libos and console objects",
			`function run(a, libos) { const r = [Object.keys(libos).sort().join(), typeof libos.syscall, typeof console.log, libos.mark ?? null];
			   libos.mark = 1; libos.syscall = null; console.log = null; return r; }`},
		{"the symbol registry and well-known symbols",
			`function run() { const r = [Object.getOwnPropertySymbols(globalThis).length, typeof Array.prototype[Symbol.iterator], Symbol.keyFor(Symbol.for("k"))];
			   globalThis[Symbol.for("k")] = 1; Array.prototype[Symbol.iterator] = null; return r; }`},
		{"Math.random starts from the call's seed",
			`function run() { return [Math.random(), Math.random()]; }`},
		{"memory grown past the snapshot (the allocator's break, the pages it handed out)",
			`function run() { const r = [typeof globalThis.big, Object.keys(globalThis).length]; globalThis.big = "y".repeat(4 << 20) + Math.random(); return r; }`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var first string
			for i := 0; i < 3; i++ {
				res := mustRun(t, e, tc.program, `{}`, nil, Options{Seed: 7})
				if i == 0 {
					first = string(res.Value)
				} else if string(res.Value) != first {
					t.Fatalf("call %d saw %s, the first call %s: state survived", i+1, res.Value, first)
				}
			}
		})
	}
	// Calls that end badly leave nothing behind either.
	probe := `function run() { return [typeof globalThis.left, typeof Object.prototype.left]; }`
	want := `["undefined","undefined"]`
	for _, bad := range []struct {
		name, program string
		limits        Limits
	}{
		{"a call that throws", `function run() { globalThis.left = 1; Object.prototype.left = 1; throw new Error("x"); }`, Limits{}},
		{"a call stopped at its wall time", `function run() { globalThis.left = 1; Object.prototype.left = 1; for (;;) {} }`, Limits{WallTime: 50 * time.Millisecond}},
		{"a call out of memory", `function run() { globalThis.left = 1; Object.prototype.left = 1; const a = []; for (;;) a.push(new Array(1e5).fill(0)); }`, Limits{}},
		{"a call that grew the memory, then threw", `function run() { globalThis.left = 1; Object.prototype.left = 1; globalThis.big = "z".repeat(8 << 20); throw new Error("x"); }`, Limits{}},
		{"a call over the syscall limit", `async function run(a, libos) { globalThis.left = 1; Object.prototype.left = 1; for (;;) { try { await libos.syscall("x", {}); } catch (e) {} } }`, Limits{Syscalls: 3}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := e.Run(hostCtx(t), bad.program, nil, nil, Options{Limits: bad.limits}); err == nil {
				t.Fatal("the bad call succeeded")
			}
			if res := mustRun(t, e, probe, `{}`, nil, Options{}); string(res.Value) != want {
				t.Fatalf("after it, the next call saw %s, want %s", res.Value, want)
			}
		})
	}
}

// "console.* logs (bounded)": levels, order, and the byte limit.
func TestRunLogs(t *testing.T) {
	e := hostTestEngine(t)
	res := mustRun(t, e, `function run() {
		console.debug("d"); console.log("l", 1, {a: 2}); console.info("i"); console.warn("w"); console.error("e");
		return null; }`, `{}`, nil, Options{})
	want := []Log{{"debug", "d"}, {"info", "l 1 "}, {"info", "i"}, {"warn", "w"}, {"error", "e"}}
	if len(res.Logs) != len(want) {
		t.Fatalf("Logs = %+v, want %+v", res.Logs, want)
	}
	for i := range want {
		// How console formats an object is the guest's business; the level, the order
		// and the plain text are the host's.
		if res.Logs[i].Level != want[i].Level || !strings.HasPrefix(res.Logs[i].Message, want[i].Message) ||
			(i != 1 && res.Logs[i].Message != want[i].Message) {
			t.Errorf("Logs[%d] = %+v, want %+v", i, res.Logs[i], want[i])
		}
	}
	if res.LogsTruncated {
		t.Error("LogsTruncated set below the limit")
	}

	t.Run("over the byte limit is limit_exceeded/logs, with the logs kept so far", func(t *testing.T) {
		res, err := e.Run(hostCtx(t), `function run() { for (let i = 0; ; i++) console.log("line " + i); }`, nil, nil,
			Options{Limits: Limits{LogBytes: 1000}})
		wantError(t, err, CodeLimitExceeded, LimitLogs)
		if !res.LogsTruncated || len(res.Logs) == 0 || res.Logs[0].Message != "line 0" {
			t.Fatalf("truncated=%v logs=%d first=%+v", res.LogsTruncated, len(res.Logs), res.Logs[:min(1, len(res.Logs))])
		}
		total := 0
		for _, l := range res.Logs {
			total += len(l.Message) + 1
		}
		if total > 1000 {
			t.Fatalf("kept %d bytes of logs, over the 1000-byte limit", total)
		}
		checkHealthy(t, e)
	})
	t.Run("empty lines are bounded too", func(t *testing.T) {
		_, err := e.Run(hostCtx(t), `function run() { for (;;) console.log(""); }`, nil, nil, Options{Limits: Limits{LogBytes: 100}})
		wantError(t, err, CodeLimitExceeded, LimitLogs)
	})
	t.Run("one huge last line still fails the call", func(t *testing.T) {
		res, err := e.Run(hostCtx(t), `function run() { console.log("é".repeat(600)); return 1; }`, nil, nil, Options{Limits: Limits{LogBytes: 101}})
		wantError(t, err, CodeLimitExceeded, LimitLogs)
		if len(res.Logs) != 1 || len(res.Logs[0].Message) != 100 {
			t.Fatalf("logs = %+v, want one line cut at a rune boundary to 100 bytes", res.Logs)
		}
	})
}

// "libos.syscall(name, args) inside the guest returns a Promise; a host error rejects it
// with an Error carrying code and message. Only JSON crosses the boundary."
func TestRunSyscalls(t *testing.T) {
	e := hostTestEngine(t)
	type seen struct {
		name string
		args string
	}
	var got []seen
	sys := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		got = append(got, seen{name, string(args)})
		switch name {
		case "clock.now":
			return json.RawMessage(`{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045}`), nil
		case "denied":
			return nil, fmt.Errorf("router: %w", &liberr.Error{Code: "capability_denied", Message: "kv:write is not granted"})
		case "internal":
			return nil, errors.New("pebble: /secret/path/000123.sst: corrupted")
		case "panics":
			panic("provider bug")
		case "bad_json":
			return json.RawMessage(`{"a":`), nil
		case "nil":
			return nil, nil
		}
		return nil, &liberr.Error{Code: "unknown_syscall", Message: "unknown syscall"}
	})
	prog := `async function run(args, libos) {
		const out = {};
		out.now = await libos.syscall("clock.now", {timezone: "UTC"});
		for (const name of ["denied", "internal", "panics", "bad_json", "other"]) {
			try { await libos.syscall(name, {}); out[name] = "resolved"; }
			catch (e) { out[name] = {isError: e instanceof Error, code: e.code, message: e.message}; }
		}
		out.nil = await libos.syscall("nil", {});
		return out;
	}`
	res := mustRun(t, e, prog, `{}`, sys, Options{})
	var out map[string]json.RawMessage
	if err := json.Unmarshal(res.Value, &out); err != nil {
		t.Fatal(err)
	}
	check := func(key, want string) {
		t.Helper()
		if string(out[key]) != want {
			t.Errorf("%s = %s, want %s", key, out[key], want)
		}
	}
	check("now", `{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045}`)
	check("denied", `{"isError":true,"code":"capability_denied","message":"kv:write is not granted"}`)
	// "an error that is not a *liberr.Error becomes a generic code without leaking internals"
	check("internal", `{"isError":true,"code":"syscall_failed","message":"syscall failed"}`)
	// "panics inside host functions — recover them"
	check("panics", `{"isError":true,"code":"syscall_failed","message":"syscall failed"}`)
	// JSON validity of both directions
	check("bad_json", `{"isError":true,"code":"syscall_failed","message":"syscall failed"}`)
	check("other", `{"isError":true,"code":"unknown_syscall","message":"unknown syscall"}`)
	check("nil", `null`)
	if len(got) != 7 || got[0] != (seen{"clock.now", `{"timezone":"UTC"}`}) {
		t.Errorf("the Syscaller saw %+v", got)
	}
	if res.Stats.Syscalls != 7 {
		t.Errorf("Stats.Syscalls = %d, want 7", res.Stats.Syscalls)
	}

	t.Run("a nil Syscaller rejects every syscall with one fixed unknown_syscall error", func(t *testing.T) {
		res := mustRun(t, e, `async function run(a, libos) {
			const r = [];
			for (const n of ["clock.now", "kv.get", ""]) {
				try { await libos.syscall(n, {}); } catch (e) { r.push(e.code + ": " + e.message); }
			}
			return r; }`, `{}`, nil, Options{})
		if string(res.Value) != `["unknown_syscall: unknown syscall","unknown_syscall: unknown syscall","unknown_syscall: unknown syscall"]` {
			t.Fatalf("got %s", res.Value)
		}
	})
}

// "enforce per-call syscall count and byte limits": the limits end the call; guest code
// cannot catch them and carry on.
func TestRunSyscallLimits(t *testing.T) {
	e := hostTestEngine(t)
	echo := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		if name == "big" {
			return json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`), nil
		}
		return args, nil
	})
	cases := []struct {
		name, program, limit string
	}{
		{"more syscalls than Limits.Syscalls", `async function run(a, libos) {
			for (let i = 0; i < 10; i++) { try { await libos.syscall("echo", {i}); } catch (e) {} }
			return "swallowed"; }`, LimitSyscalls},
		{"syscall arguments over Limits.SyscallBytes", `async function run(a, libos) {
			try { await libos.syscall("echo", {s: "y".repeat(2000)}); } catch (e) {}
			return "swallowed"; }`, LimitSyscallBytes},
		{"a syscall result over Limits.SyscallBytes", `async function run(a, libos) {
			try { await libos.syscall("big", {}); } catch (e) {}
			return "swallowed"; }`, LimitSyscallBytes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(hostCtx(t), tc.program, nil, echo, Options{Limits: Limits{Syscalls: 5, SyscallBytes: 1000}})
			wantError(t, err, CodeLimitExceeded, tc.limit)
			if tc.limit == LimitSyscalls && res.Stats.Syscalls != 5 {
				t.Errorf("Stats.Syscalls = %d, want the 5 that ran", res.Stats.Syscalls)
			}
			checkHealthy(t, e)
		})
	}
}

// "Time and randomness reach the guest only from the host ... The same program and inputs
// give byte-identical output across runs, instances and processes."
func TestRunDeterminism(t *testing.T) {
	prog, args, opts := determinismCase()
	shared := newHostTestEngine(t, Config{PoolSize: 1})
	first := mustRun(t, shared, prog, args, nil, opts).Value
	if !bytes.Contains(first, []byte(`"iso":"2026-01-02T03:04:05.678Z"`)) {
		t.Fatalf("new Date(value) is the native Date: %s", first)
	}
	outputs := map[string][]byte{}
	// Across runs on one pooled instance.
	outputs["same instance"] = mustRun(t, shared, prog, args, nil, opts).Value
	// Across instances: an engine that pools nothing instantiates afresh every call.
	fresh := newHostTestEngine(t, Config{PoolSize: -1})
	outputs["fresh instance"] = mustRun(t, fresh, prog, args, nil, opts).Value
	// Across engines, compiled without the cache.
	other, err := NewEngine(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	outputs["another engine"] = mustRun(t, other, prog, args, nil, opts).Value
	for how, out := range outputs {
		if !bytes.Equal(out, first) {
			t.Errorf("%s: %s, want byte-identical %s", how, out, first)
		}
	}

	// The seed is what makes Math.random reproducible.
	other43 := mustRun(t, shared, prog, args, nil, Options{Seed: 43}).Value
	if bytes.Equal(other43, first) {
		t.Error("seeds 42 and 43 gave the same Math.random sequence")
	}
	// Seed 0 means a fresh random seed per call.
	r1 := mustRun(t, shared, prog, args, nil, Options{}).Value
	r2 := mustRun(t, shared, prog, args, nil, Options{}).Value
	if bytes.Equal(r1, r2) {
		t.Error("two calls with Seed 0 gave the same Math.random sequence")
	}
}

// determinismCase is one program that uses Date and Math.random, with a fixed seed.
func determinismCase() (prog, args string, opts Options) {
	prog = `function run(args) {
		const r = [];
		for (let i = 0; i < 5; i++) r.push(Math.random());
		return {iso: new Date(1767323045678).toISOString(), random: r, args};
	}`
	return prog, `{"k":[1,2,{"x":"y"}]}`, Options{Seed: 42}
}

// "... byte-identical output across runs, instances and processes": the test binary runs
// itself as a child process and compares the child's output with its own.
func TestRunDeterminismAcrossProcesses(t *testing.T) {
	prog, args, opts := determinismCase()
	if os.Getenv("LIBOS_WASM_DETERMINISM_CHILD") == "1" {
		e := newHostTestEngine(t, Config{})
		fmt.Printf("VALUE %s\n", mustRun(t, e, prog, args, nil, opts).Value)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	want := mustRun(t, hostTestEngine(t), prog, args, nil, opts).Value
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunDeterminismAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LIBOS_WASM_DETERMINISM_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, got, ok := strings.Cut(string(out), "VALUE ")
	got, _, _ = strings.Cut(got, "\n")
	if !ok || got != string(want) {
		t.Fatalf("child process wrote %q, this one %s", got, want)
	}
}

// "An Engine ... safe for concurrent use" (run with -race).
func TestRunConcurrent(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 2})
	sys := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		return args, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				switch (g + i) % 3 {
				case 0:
					res, err := e.Run(context.Background(), `async function run(a, libos) { return (await libos.syscall("echo", {n: a.n})).n * 2; }`,
						json.RawMessage(fmt.Sprintf(`{"n":%d}`, g*100+i)), sys, Options{})
					if err != nil || string(res.Value) != fmt.Sprint((g*100+i)*2) {
						errs <- fmt.Errorf("g%d/%d: %v %v", g, i, res, err)
					}
				case 1:
					_, err := e.Run(context.Background(), `function run() { throw new Error("x"); }`, nil, nil, Options{})
					if !errors.Is(err, &Fault{Code: CodeJSError}) {
						errs <- fmt.Errorf("g%d/%d: %v", g, i, err)
					}
				case 2:
					_, err := e.Run(context.Background(), `function run() { for (;;) {} }`, nil, nil, Options{Limits: Limits{WallTime: 20 * time.Millisecond}})
					if !errors.Is(err, &Fault{Code: CodeLimitExceeded, Limit: LimitWallTime}) {
						errs <- fmt.Errorf("g%d/%d: %v", g, i, err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The host process survives every guest failure, including a panic in a host function
// it calls on the guest's behalf.

// "A trap ... means the instance is unusable; the host discards it" and "the host process
// survives every guest failure": corrupt a pooled instance's heap as a guest bug would,
// and the next call traps with a typed error, after which the engine works again.
func TestRunSurvivesTrap(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	for _, fill := range []byte{0x00, 0xAB, 0xFF} {
		t.Run(fmt.Sprintf("heap filled with %#x", fill), func(t *testing.T) {
			checkHealthy(t, e) // leaves one instance in the pool
			in, err := e.get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			const stackTop = 1 << 20 // the guest's stack comes first; its heap follows
			in.mem.Write(stackTop, bytes.Repeat([]byte{fill}, int(in.mem.Size())-stackTop))
			e.put(context.Background(), in)
			_, err = e.Run(hostCtx(t), sumProgram, json.RawMessage(sumArgs), nil, Options{})
			we := wantError(t, err, CodeTrap, "")
			if strings.Contains(we.Message, "\n") {
				t.Errorf("Message carries the wasm stack trace: %q", we.Message)
			}
			checkHealthy(t, e)
		})
	}
}

func TestRunOutputLimit(t *testing.T) {
	e := hostTestEngine(t)
	_, err := e.Run(hostCtx(t), `function run() { return "x".repeat(5000); }`, nil, nil, Options{Limits: Limits{OutputBytes: 4096}})
	wantError(t, err, CodeLimitExceeded, LimitOutput)
	res := mustRun(t, e, `function run() { return "x".repeat(4094); }`, `{}`, nil, Options{Limits: Limits{OutputBytes: 4096}})
	if len(res.Value) != 4096 {
		t.Fatalf("len = %d: a result of exactly the limit must pass", len(res.Value))
	}
}

// "memory (hard cap via wazero page limit + QuickJS's graceful limit)": with the graceful
// limit set at the cap, the page limit alone must hold; "an instance is discarded after
// ... memory peak above a threshold".
func TestRunHardMemoryCap(t *testing.T) {
	const capBytes = 16 << 20
	e := newHostTestEngine(t, Config{MaxMemory: capBytes, PoolSize: 1})
	res, err := e.Run(hostCtx(t), `function run() { const a = []; for (;;) a.push(new Float64Array(1 << 16)); }`, nil, nil,
		Options{Limits: Limits{Memory: capBytes}})
	wantError(t, err, CodeLimitExceeded, LimitMemory)
	if res.Stats.PeakMemory > capBytes || res.Stats.PeakMemory < capBytes/2 {
		t.Fatalf("PeakMemory = %d, want near but not above the %d-byte cap", res.Stats.PeakMemory, capBytes)
	}
	res = mustRun(t, e, sumProgram, sumArgs, nil, Options{})
	if res.Stats.PeakMemory > capBytes/4 {
		t.Fatalf("the next call ran in an instance of %d bytes: the grown one was pooled, not discarded", res.Stats.PeakMemory)
	}
}

// Bad input always gets a clear, typed error: a program too big for the guest's memory.
func TestRunProgramTooBig(t *testing.T) {
	e := newHostTestEngine(t, Config{MaxMemory: 16 << 20})
	_, err := e.Run(hostCtx(t), "function run() { return 1; }"+strings.Repeat(" ", 20<<20), nil, nil, Options{})
	wantError(t, err, CodeLimitExceeded, LimitMemory)
	checkHealthy(t, e)
}

func TestRunStats(t *testing.T) {
	e := hostTestEngine(t)
	res := mustRun(t, e, sumProgram, sumArgs, nil, Options{})
	if res.Stats.Duration <= 0 || res.Stats.PeakMemory < 1<<20 || res.Stats.Syscalls != 0 {
		t.Fatalf("Stats = %+v", res.Stats)
	}
}

func TestRunCanceled(t *testing.T) {
	e := hostTestEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Run(ctx, sumProgram, json.RawMessage(sumArgs), nil, Options{})
	wantError(t, err, CodeCanceled, "")

	t.Run("cancelled while running", func(t *testing.T) {
		ctx, cancel := context.WithCancel(hostCtx(t))
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := e.Run(ctx, `function run() { for (;;) {} }`, nil, nil, Options{Limits: Limits{WallTime: 30 * time.Second}})
		wantError(t, err, CodeCanceled, "")
		checkHealthy(t, e)
	})
	t.Run("the caller's own deadline comes first", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(hostCtx(t), 50*time.Millisecond)
		defer cancel()
		_, err := e.Run(ctx, `function run() { for (;;) {} }`, nil, nil, Options{Limits: Limits{WallTime: 30 * time.Second}})
		wantError(t, err, CodeCanceled, "")
		checkHealthy(t, e)
	})
	// The caller's deadline is noticed by poll on the monotonic clock, which may be
	// before the context's own timer has fired: the context then has no Err and no Cause
	// yet. A Context whose Deadline is advisory and that is never cancelled makes that
	// window permanent, so the error must be built without the context's cause.
	t.Run("the caller's deadline passes before its context says so", func(t *testing.T) {
		ctx := advisoryDeadline{hostCtx(t), time.Now().Add(50 * time.Millisecond)}
		_, err := e.Run(ctx, `function run() { for (;;) {} }`, nil, nil, Options{Limits: Limits{WallTime: 30 * time.Second}})
		we := wantError(t, err, CodeCanceled, "")
		if !strings.Contains(we.Message, "deadline") {
			t.Errorf("message %q does not say the caller's deadline passed", we.Message)
		}
		checkHealthy(t, e)
	})
	t.Run("a syscall that fails after the caller's deadline ends the call", func(t *testing.T) {
		ctx := advisoryDeadline{hostCtx(t), time.Now().Add(30 * time.Millisecond)}
		late := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			time.Sleep(60 * time.Millisecond)
			return nil, errors.New("gave up")
		})
		_, err := e.Run(ctx, `async function run(a, libos) { try { await libos.syscall("late", {}); } catch (e) {} return 1; }`,
			nil, late, Options{Limits: Limits{WallTime: 30 * time.Second}})
		wantError(t, err, CodeCanceled, "")
		checkHealthy(t, e)
	})
	t.Run("cancelled while a syscall blocks", func(t *testing.T) {
		ctx, cancel := context.WithCancel(hostCtx(t))
		block := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		})
		_, err := e.Run(ctx, `async function run(a, libos) { try { await libos.syscall("block", {}); } catch (e) {} return 1; }`,
			nil, block, Options{Limits: Limits{WallTime: 30 * time.Second}})
		wantError(t, err, CodeCanceled, "")
		checkHealthy(t, e)
	})
}

// advisoryDeadline reports a deadline but is never done before its parent: a legal
// Context (a deadline is a hint), and the widest form of the window between a deadline
// passing and a context's timer firing.
type advisoryDeadline struct {
	context.Context
	d time.Time
}

func (c advisoryDeadline) Deadline() (time.Time, bool) { return c.d, true }

func TestEngineConfigAndClose(t *testing.T) {
	if _, err := NewEngine(context.Background(), Config{MaxMemory: 1 << 20}); err == nil {
		t.Error("MaxMemory of 1 MiB accepted; the guest cannot even start in it")
	}
	e, err := NewEngine(context.Background(), Config{CacheDir: hostTestCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkHealthy(t, e)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Run(context.Background(), sumProgram, nil, nil, Options{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

// A warm on-disk cache gives a new Engine that works the same.
func TestEngineCompilationCache(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		e := newHostTestEngine(t, Config{CacheDir: dir})
		checkHealthy(t, e)
	}
}

func TestErrorIs(t *testing.T) {
	err := fmt.Errorf("engine: %w", asError(&Fault{Code: CodeLimitExceeded, Limit: LimitMemory, Message: "m"}))
	if !errors.Is(err, &Fault{Code: CodeLimitExceeded}) || !errors.Is(err, &Fault{Code: CodeLimitExceeded, Limit: LimitMemory}) {
		t.Error("errors.Is does not match by code and limit")
	}
	if errors.Is(err, &Fault{Code: CodeLimitExceeded, Limit: LimitStack}) || errors.Is(err, &Fault{Code: CodeTrap}) {
		t.Error("errors.Is matches another code or limit")
	}
	// The one error type: the code matches any layer's error of the same code.
	if !errors.Is(err, &Error{Code: liberr.CodeLimitExceeded, Layer: "engine"}) || liberr.CodeOf(err) != liberr.CodeLimitExceeded {
		t.Error("a sandbox limit_exceeded does not match the code across layers")
	}
	if got := err.Error(); got != "engine: wasm: limit_exceeded (memory): m" {
		t.Errorf("Error() = %q", got)
	}
}

// "poll (deadline/ctx; called often — keep it very cheap ...; avoid allocations)".
func TestPollAllocatesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &call{ctx: ctx, parent: ctx, deadline: time.Since(monoBase) + time.Hour}
	cctx := context.WithValue(ctx, callKey{}, c)
	stack := make([]uint64, 1)
	if n := testing.AllocsPerRun(1000, func() { hostPoll(cctx, stack) }); n != 0 {
		t.Fatalf("poll allocates %v times per call", n)
	}
	if stack[0] != 0 {
		t.Fatal("poll said stop before the deadline")
	}
	c.deadline = time.Since(monoBase) - time.Millisecond
	hostPoll(cctx, stack)
	if stack[0] != 1 || c.stopped() != stopDeadline {
		t.Fatalf("poll past the deadline: %d, reason %d", stack[0], c.stopped())
	}
}

// A syscall may run another program on the same Engine (tools.call reaching a JIT tool):
// the nested call gets its own instance and the outer call's remaining time.
func TestRunNested(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	var sys Syscaller
	sys = syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		switch name {
		case "double":
			res, err := e.Run(ctx, `function run(a) { return a.n * 2; }`, args, nil, Options{})
			if err != nil {
				return nil, err
			}
			return res.Value, nil
		case "spin":
			_, err := e.Run(ctx, `function run() { for (;;) {} }`, nil, sys, Options{Limits: Limits{WallTime: time.Minute}})
			return nil, err
		}
		return nil, &liberr.Error{Code: "unknown_syscall", Message: "unknown syscall"}
	})
	res := mustRun(t, e, `async function run(a, libos) { return await libos.syscall("double", {n: 21}); }`, `{}`, sys, Options{})
	if string(res.Value) != `42` {
		t.Fatalf("nested call gave %s", res.Value)
	}
	// The inner call has a minute, the outer one 100 ms: the outer deadline wins.
	_, err := e.Run(hostCtx(t), `async function run(a, libos) { try { await libos.syscall("spin", {}); } catch (e) {} return 1; }`,
		nil, sys, Options{Limits: Limits{WallTime: 100 * time.Millisecond}})
	wantError(t, err, CodeLimitExceeded, LimitWallTime)
	checkHealthy(t, e)
}

// Protocol-diagnostics Skill: "Numbers keep their exact spelling (2^53+1 stays exact)."
// A JavaScript number is a double, so a number it cannot hold is refused, never rounded:
// in the arguments before the program runs, in a syscall result at that syscall (the
// call stops; the program cannot carry on without the value). The error names the JSON
// Pointer and says to send the number as a string.
func TestRunRefusesNumbersADoubleCannotHold(t *testing.T) {
	e := hostTestEngine(t)
	ran := false
	sys := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		ran = true
		return json.RawMessage(`{"found":true,"value":{"list":[1,18446744073709551617]}}`), nil
	})
	_, err := e.Run(hostCtx(t), `async function run(a, libos) { await libos.syscall("kv.get", {key: "k"}); return a; }`,
		json.RawMessage(`{"ok":1,"n":{"deep":[0.5,9007199254740993]}}`), sys, Options{})
	we := wantError(t, err, CodeNumberInexact, "")
	if we.Path != "/n/deep/1" || ran || !strings.Contains(we.Message, "9007199254740993 at /n/deep/1") ||
		!strings.Contains(we.Message, "9007199254740992") || !strings.Contains(we.Message, "send it as a string") {
		t.Fatalf("%+v (the program ran: %v)", we, ran)
	}
	_, err = e.Run(hostCtx(t), `async function run(a, libos) {
		try { await libos.syscall("kv.get", {key: "k"}); } catch (e) { return {caught: true}; }
		return {caught: false};
	}`, json.RawMessage(`{"n":9007199254740992}`), sys, Options{})
	we = wantError(t, err, CodeNumberInexact, "")
	if we.Path != "/value/list/1" || !ran || !strings.Contains(we.Message, "result of syscall kv.get") {
		t.Fatalf("%+v", we)
	}
	checkHealthy(t, e)
	// Numbers a double holds pass unchanged, whatever their spelling.
	res := mustRun(t, e, `function run(a) { return a; }`, `{"a":9007199254740992,"b":0.1,"c":1e300,"d":-0}`, nil, Options{})
	assertJSON(t, res.Value, `{"a":9007199254740992,"b":0.1,"c":1e300,"d":0}`)
}
