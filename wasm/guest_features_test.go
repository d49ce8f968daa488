package wasm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// featureCase is one row of the ES feature table: a program and the JSON it must return.
type featureCase struct {
	name    string // the feature, as the spec names it
	program string
	want    string
}

// The language and built-ins that model-written tools use, each a row: "classes, private
// fields, async/await, async generators, destructuring, spread, ?., ??, ??=, BigInt (inside
// run), Map/Set, regex named groups and lookbehind, generators, Proxy, Reflect, template
// literals, labelled break, getters/setters, Symbol.iterator, JSON round trip, plus the
// prelude methods".
var featureTable = []featureCase{
	{"classes", `class A { constructor(x) { this.x = x } get double() { return this.x * 2 } static make() { return new A(3) } }
		class B extends A { constructor() { super(5) } describe() { return 'B' + super.double } }
		function run() { return [A.make().double, new B().describe(), new B() instanceof A] }`,
		`[6, "B10", true]`},
	{"private fields and methods", `class C { #n = 1; static #count = 0; #inc() { return ++this.#n }
		bump() { C.#count++; return this.#inc() } static count() { return C.#count } peek(o) { try { return o.#n } catch (e) { return e.name } } }
		function run() { const c = new C(); c.bump(); return [c.bump(), C.count(), c.peek(c), c.peek({})] }`,
		`[3, 2, 3, "TypeError"]`},
	{"async/await", `async function twice(x) { await null; return x * 2 }
		async function run() { const a = await twice(2); const [b, c] = await Promise.all([twice(3), twice(4)]); return a + b + c }`,
		`18`},
	{"async generators and for await", `async function* gen() { for (let i = 0; i < 3; i++) { await null; yield i } }
		async function run() { const out = []; for await (const v of gen()) out.push(v); return out }`,
		`[0, 1, 2]`},
	{"destructuring with defaults and rest", `function f({a, b: {c = 7} = {}, ...rest}) { const [x, , y = 3, ...zs] = [1, 2, undefined, 4, 5]; return {a, c, rest, x, y, zs} }
		function run() { return f({a: 1, d: 4}) }`,
		`{"a": 1, "c": 7, "rest": {"d": 4}, "x": 1, "y": 3, "zs": [4, 5]}`},
	{"spread in calls, arrays and objects", `function run() { const xs = [3, 1, 2]; return [Math.max(...xs), [...xs, ...'ab'], {...{a: 1}, b: 2, ...null}] }`,
		`[3, [3, 1, 2, "a", "b"], {"a": 1, "b": 2}]`},
	{"optional chaining", `function run() { const o = {a: {b: () => 42}}; return [o?.a?.b?.(), o.x?.y, o.x?.[0] ?? 'none', o.a.c?.()] .map(v => v === undefined ? 'undef' : v) }`,
		`[42, "undef", "none", "undef"]`},
	{"nullish coalescing", `function run() { return [null ?? 1, 0 ?? 1, '' ?? 1, false ?? 1, undefined ?? null] }`,
		`[1, 0, "", false, null]`},
	{"logical assignment", `function run() { let a = null, b = 0, c = 1; a ??= 5; b ||= 6; c &&= 7; const o = {}; o.x ??= []; o.x.push(1); return [a, b, c, o] }`,
		`[5, 6, 7, {"x": [1]}]`},
	{"BigInt inside run", `function run() { const big = 2n ** 64n + 1n; return [big.toString(), String(BigInt.asUintN(8, 257n)), typeof big, Number(10n ** 3n)] }`,
		`["18446744073709551617", "1", "bigint", 1000]`},
	{"Map and Set", `function run() { const m = new Map([['a', 1]]); m.set('b', 2); const s = new Set([1, 2, 2, 3]); return [[...m.entries()], m.get('b'), s.size, [...s].filter(x => s.has(x + 1))] }`,
		`[[["a", 1], ["b", 2]], 2, 3, [1, 2]]`},
	{"regex named groups", `function run() { const m = /(?<year>\d{4})-(?<month>\d{2})/.exec('on 2024-05'); return [m.groups.year, m.groups.month, '2024-05'.replace(/(?<y>\d+)-(?<m>\d+)/, '$<m>/$<y>')] }`,
		`["2024", "05", "05/2024"]`},
	{"regex lookbehind, sticky and unicode", `function run() { return ['$10 €20'.match(/(?<=\$)\d+/)[0], 'x€y'.match(/(?<!\$)\d+/), /\u{1F600}/u.test('😀'), [...'a1b2'.matchAll(/\d/g)].map(m => m[0])] }`,
		`["10", null, true, ["1", "2"]]`},
	{"generators", `function* fib() { let [a, b] = [0, 1]; for (;;) { yield a; [a, b] = [b, a + b] } }
		function run() { const out = []; for (const v of fib()) { if (v > 20) break; out.push(v) } const g = fib(); g.next(); return [out, g.next().value, g.return(9)] }`,
		`[[0, 1, 1, 2, 3, 5, 8, 13], 1, {"value": 9, "done": true}]`},
	{"Proxy", `function run() { const log = []; const p = new Proxy({a: 1}, { get(t, k, r) { log.push(String(k)); return Reflect.get(t, k, r) }, has(t, k) { return k === 'magic' || k in t } }); return [p.a, 'magic' in p, 'b' in p, log] }`,
		`[1, true, false, ["a"]]`},
	{"Reflect", `function run() { const o = {}; Reflect.defineProperty(o, 'x', {value: 1, enumerable: false}); return [Reflect.ownKeys(o), Reflect.has(o, 'x'), Reflect.apply(Math.max, null, [1, 3]), Reflect.getPrototypeOf([]) === Array.prototype] }`,
		`[["x"], true, 3, true]`},
	{"template literals and tagged templates", "function tag(s, ...v) { return s.raw.join('|') + v.join(',') }\n" +
		"function run() { const n = 2; return [`a${n + 1}b`, tag`x${1}y${2}z`, `multi\nline`] }",
		`["a3b", "x|y|z1,2", "multi\nline"]`},
	{"labelled break and continue", `function run() { const out = []; outer: for (let i = 0; i < 3; i++) { for (let j = 0; j < 3; j++) { if (j === 1) continue outer; if (i === 2) break outer; out.push([i, j]) } } return out }`,
		`[[0, 0], [1, 0]]`},
	{"getters and setters", `function run() { const o = { _v: 1, get v() { return this._v * 10 }, set v(x) { this._v = x } }; o.v = 4; const d = Object.getOwnPropertyDescriptor(o, 'v'); return [o.v, typeof d.get, typeof d.set] }`,
		`[40, "function", "function"]`},
	{"Symbol.iterator and iteration protocols", `class Range { constructor(n) { this.n = n } *[Symbol.iterator]() { for (let i = 0; i < this.n; i++) yield i } }
		function run() { const r = new Range(4); const [first, ...others] = r; return [first, others, Array.from(r, x => x * 2), Math.max(...r)] }`,
		`[0, [1, 2, 3], [0, 2, 4, 6], 3]`},
	{"JSON round trip", `function run(args) { const text = JSON.stringify(args); const back = JSON.parse(text, (k, v) => typeof v === 'number' ? v + 1 : v); return {text, back, pretty: JSON.stringify({a: [1]}, null, 1)} }`,
		`{"text": "{}", "back": {}, "pretty": "{\n \"a\": [\n  1\n ]\n}"}`},
	{"Array.prototype.at (prelude)", `function run() { return [[1, 2, 3].at(-1), [1, 2, 3].at(0), [1, 2, 3].at(5) ?? 'none'] }`, `[3, 1, "none"]`},
	{"String.prototype.at (prelude)", `function run() { return ['abc'.at(-1), 'abc'.at(1.9), 'abc'.at(-4) ?? 'none'] }`, `["c", "b", "none"]`},
	{"Object.hasOwn (prelude)", `function run() { return [Object.hasOwn({a: 1}, 'a'), Object.hasOwn({}, 'toString'), Object.hasOwn(Object.create({a: 1}), 'a')] }`, `[true, false, false]`},
	{"findLast and findLastIndex (prelude)", `function run() { const xs = [1, 2, 3, 4]; return [xs.findLast(x => x % 2), xs.findLastIndex(x => x % 2), xs.findLastIndex(x => x > 9)] }`, `[3, 2, -1]`},
	{"Error cause (prelude)", `function run() { try { try { null.x } catch (e) { throw new Error('wrapped', {cause: e}) } } catch (e) { return [e.message, e.cause instanceof TypeError, Object.keys(e)] } }`, `["wrapped", true, []]`},
	{"structuredClone (prelude)", `function run() { const a = {x: [1, {y: 2}]}; const b = structuredClone(a); b.x[1].y = 3; return [a, b] }`, `[{"x": [1, {"y": 2}]}, {"x": [1, {"y": 3}]}]`},
	{"toSorted, toReversed, with (prelude)", `function run() { const xs = [3, 1, 2]; return [xs.toSorted(), xs.toSorted((a, b) => b - a), xs.toReversed(), xs.with(1, 9), xs] }`, `[[1, 2, 3], [3, 2, 1], [2, 1, 3], [3, 9, 2], [3, 1, 2]]`},
}

func TestGuestFeatureTable(t *testing.T) {
	e := hostTestEngine(t)
	for _, tc := range featureTable {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(hostCtx(t), tc.program, json.RawMessage(`{}`), nil, Options{})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			assertJSON(t, res.Value, tc.want)
		})
	}
}

func assertJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// The sandbox's own rules, as seen from inside the guest.
func TestGuestSandboxRules(t *testing.T) {
	e := hostTestEngine(t)
	for _, tc := range []featureCase{
		{"eval and the Function constructors are absent at run time",
			`function run() { const r = []; for (const f of [
				() => eval('1'),
				() => (function () {}).constructor('return 1')(),
				() => new Function('x'),
				() => Function('return 1'),
				() => (async function () {}).constructor('return 1'),
				() => (function* () {}).constructor('yield 1'),
				() => (async function* () {}).constructor('yield 1'),
			]) { try { f(); r.push('ran') } catch (e) { r.push(e.name) } } return r }`,
			`["ReferenceError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError"]`},
		{"no Deno, WebAssembly, std, os, require, process or module loader",
			`function run() { return [typeof Deno, typeof WebAssembly, typeof std, typeof os, typeof require, typeof process, typeof eval, typeof globalThis.import] }`,
			`["undefined", "undefined", "undefined", "undefined", "undefined", "undefined", "undefined", "undefined"]`},
		{"dynamic import is rejected", `async function run() { try { await import('x'); return 'loaded' } catch (e) { return 'rejected' } }`, `"rejected"`},
		{"the guest's local time zone is UTC", `function run() { return [new Date(0).getTimezoneOffset(), new Date(Date.UTC(2020, 0, 1)).getHours()] }`, `[0, 0]`},
		{"libos.syscall returns a Promise", `function run(a, libos) { const p = libos.syscall('x', {}); p.catch(() => {}); return p instanceof Promise }`, `true`},
		{"the libos object is frozen", `function run(a, libos) { return [Object.isFrozen(libos), Object.keys(libos)] }`, `[true, ["syscall"]]`},
		{"console methods exist and are not enumerable on the global object",
			`function run() { return [typeof console.log, typeof console.info, typeof console.warn, typeof console.error, typeof console.debug, Object.keys(globalThis).includes('console')] }`,
			`["function", "function", "function", "function", "function", false]`},
		{"no state survives between calls (first call)", `var counter = (globalThis.counter || 0) + 1; Array.prototype.leak = 1; function run() { return counter }`, `1`},
		{"no state survives between calls (second call)", `function run() { return [typeof counter, [].leak === undefined] }`, `["undefined", true]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(hostCtx(t), tc.program, json.RawMessage(`{}`), nil, Options{})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			assertJSON(t, res.Value, tc.want)
		})
	}
}

// "Time and randomness reach the guest only through the host, so validation is
// deterministic byte for byte": Math.random is seeded from the seed argument.
func TestGuestDeterminism(t *testing.T) {
	e := hostTestEngine(t)
	prog := `function run() { return {r: [Math.random(), Math.random(), Math.random()]} }`
	run := func(seed uint64) json.RawMessage {
		res, err := e.Run(hostCtx(t), prog, nil, nil, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return res.Value
	}
	a, b, c := run(7), run(7), run(8)
	if string(a) != string(b) {
		t.Errorf("the same seed gave different output:\n%s\n%s", a, b)
	}
	if string(a) == string(c) {
		t.Errorf("different seeds gave the same Math.random sequence: %s", a)
	}
	var v struct {
		R []float64 `json:"r"`
	}
	if err := json.Unmarshal(a, &v); err != nil {
		t.Fatal(err)
	}
	for _, r := range v.R {
		if r < 0 || r >= 1 {
			t.Errorf("Math.random() = %v, want [0, 1)", r)
		}
	}
}

// JIT authoring Skill: "Date.now() and argument-less new Date() throw a typed error that
// says to use libos.syscall("clock.now", …), in validation and in production alike;
// new Date(value) and the rest of Date keep working." The sandbox has no ambient clock.
func TestGuestHasNoAmbientClock(t *testing.T) {
	e := hostTestEngine(t)
	for _, src := range []string{
		`function run() { return Date.now(); }`,
		`function run() { return new Date().toISOString(); }`,
		`function run() { return Date(); }`,
		`function run() { return String(new globalThis.Date()); }`,
		`function run() { class D extends Date {}; return new D().getTime(); }`,
		`function run() { return Reflect.construct(Date, []).getTime(); }`,
		`function run() { return new (new Date(0).constructor)().getTime(); }`,
		`function run() { return Date.prototype.constructor.now(); }`,
		`async function run() { await null; return Date.now(); }`,
		`function run() { try { Date.now(); } catch (e) { throw e; } }`,
	} {
		_, err := e.Run(hostCtx(t), src, nil, nil, Options{})
		we := wantError(t, err, CodeAmbientClock, "")
		if !strings.Contains(we.Message, `libos.syscall("clock.now"`) || !strings.HasPrefix(we.Message, "AmbientClockError: ") {
			t.Errorf("%s: message %q must name libos.syscall(\"clock.now\", …)", src, we.Message)
		}
	}
	// A program may catch the refusal and see what it is.
	res := mustRun(t, e, `function run() { try { return Date.now(); } catch (e) { return [e.name, e instanceof Error]; } }`, `{}`, nil, Options{})
	assertJSON(t, res.Value, `["AmbientClockError", true]`)
	// Everything that reads no clock keeps working.
	res = mustRun(t, e, `function run() {
		const d = new Date(1767323045678);
		class D extends Date {}
		return [d.toISOString(), new Date("2026-01-02T03:04:05Z").getTime(), Date.UTC(2026, 0, 2),
			Date.parse("2026-01-02T03:04:05.000Z"), d instanceof Date, new D(0).getTime(), new Date(d).getTime(),
			typeof Date, Date.name, Date.length, new Date(2026, 0, 2, 3, 4, 5).toISOString(), structuredClone(d).getTime()];
	}`, `{}`, nil, Options{})
	assertJSON(t, res.Value, `["2026-01-02T03:04:05.678Z", 1767323045000, 1767312000000, 1767323045000, true, 0, 1767323045678,
		"function", "Date", 7, "2026-01-02T03:04:05.000Z", 1767323045678]`)
}
