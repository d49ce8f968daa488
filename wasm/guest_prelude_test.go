package wasm

import (
	"encoding/json"
	"testing"
)

// The prelude's built-ins against their specifications. Every expected value is what Node
// 20 (V8, where these are native) returns for the same program, so a row checks "spec-correct
// edge cases (negative indices, non-integer, out of range)" and "non-enumerable like native
// built-ins" at once.
var preludeTable = []featureCase{
	{"Array.prototype.at: negative, non-integer, out of range, NaN",
		`function run() { const a = [10, 20, 30]; return [a.at(-1), a.at(-3), a.at(-4) === undefined, a.at(3) === undefined, a.at(1.7), a.at(-1.7), a.at(NaN), a.at('1'), a.at(Infinity) === undefined, a.at(-Infinity) === undefined] }`,
		`[30,10,true,true,20,30,10,20,true,true]`},
	{"Array.prototype.at on array-likes and holes",
		`function run() { return [Array.prototype.at.call({length: 2, 0: 'a', 1: 'b'}, -1), Array.prototype.at.call('xyz', 0), [, 1].at(0) === undefined, Array.prototype.at.call({length: -5}, 0) === undefined] }`,
		`["b","x",true,true]`},
	{"Array.prototype.at throws on null this",
		`function run() { try { Array.prototype.at.call(null, 0); return 'no' } catch (e) { return e.name } }`,
		`"TypeError"`},
	{"built-ins are non-enumerable, named and sized like native ones",
		`function run() { const d = (o, k) => { const x = Object.getOwnPropertyDescriptor(o, k); return [x.enumerable, x.writable, x.configurable, typeof x.value, x.value.name, x.value.length] }; const TA = Object.getPrototypeOf(Int8Array.prototype); return [d(Array.prototype, 'at'), d(Array.prototype, 'findLast'), d(Array.prototype, 'findLastIndex'), d(Array.prototype, 'toSorted'), d(Array.prototype, 'toReversed'), d(Array.prototype, 'with'), d(String.prototype, 'at'), d(Object, 'hasOwn'), d(TA, 'at'), d(TA, 'findLast'), d(TA, 'toSorted'), d(TA, 'with')] }`,
		`[[false,true,true,"function","at",1],[false,true,true,"function","findLast",1],[false,true,true,"function","findLastIndex",1],[false,true,true,"function","toSorted",1],[false,true,true,"function","toReversed",0],[false,true,true,"function","with",2],[false,true,true,"function","at",1],[false,true,true,"function","hasOwn",2],[false,true,true,"function","at",1],[false,true,true,"function","findLast",1],[false,true,true,"function","toSorted",1],[false,true,true,"function","with",2]]`},
	{"for-in over arrays does not see the new methods",
		`function run() { const ks = []; for (const k in [1]) ks.push(k); return [ks, Object.keys(Array.prototype), Object.keys(String.prototype)] }`,
		`[["0"],[],[]]`},
	{"the new methods are not constructors",
		`function run() { try { new ([].at)(0); return 'constructed' } catch (e) { return e.name } }`,
		`"TypeError"`},
	{"String.prototype.at: code units, negatives, coercion",
		`function run() { const s = 'a😀b'; return [s.at(0), s.at(-1), s.at(1) === '\ud83d', 'abc'.at(-4) === undefined, String.prototype.at.call(123, -1), 'abc'.at(undefined)] }`,
		`["a","b",true,true,"3","a"]`},
	{"String.prototype.at throws on null and undefined this",
		`function run() { const r = []; for (const v of [null, undefined]) { try { String.prototype.at.call(v, 0); r.push('no') } catch (e) { r.push(e.name) } } return r }`,
		`["TypeError","TypeError"]`},
	{"TypedArray at, findLast, findLastIndex",
		`function run() { const t = new Int16Array([5, -6, 7, -8]); return [t.at(-1), t.at(4) === undefined, t.findLast(x => x > 0), t.findLastIndex(x => x > 0), t.findLast(x => x > 99) === undefined, t.findLastIndex(x => x > 99)] }`,
		`[-8,true,7,2,true,-1]`},
	{"TypedArray methods reject other receivers",
		`function run() { try { Int8Array.prototype.at.call([1], 0); return 'no' } catch (e) { return e.name } }`,
		`"TypeError"`},
	{"TypedArray toSorted, toReversed, with keep the type and the original",
		`function run() { const t = new Uint8Array([3, 1, 2]); const s = t.toSorted(); const r = t.toReversed(); const w = t.with(-1, 300); return [Array.from(s), s.constructor.name, Array.from(r), Array.from(w), Array.from(t)] }`,
		`[[1,2,3],"Uint8Array",[2,1,3],[3,1,44],[3,1,2]]`},
	{"TypedArray with out of range is a RangeError",
		`function run() { try { new Uint8Array(2).with(2, 1); return 'no' } catch (e) { return e.name } }`,
		`"RangeError"`},
	{"Object.hasOwn: own, inherited, symbols, coercion of the key",
		`function run() { const s = Symbol('s'); const o = Object.create({inh: 1}); o.own = 1; o[s] = 1; o[1] = 1; return [Object.hasOwn(o, 'own'), Object.hasOwn(o, 'inh'), Object.hasOwn(o, s), Object.hasOwn(o, 1), Object.hasOwn([1], 0), Object.hasOwn('ab', 'length')] }`,
		`[true,false,true,true,true,true]`},
	{"Object.hasOwn throws on null and undefined",
		`function run() { const r = []; for (const v of [null, undefined]) { try { Object.hasOwn(v, 'x'); r.push('no') } catch (e) { r.push(e.name) } } return r }`,
		`["TypeError","TypeError"]`},
	{"findLast and findLastIndex: order, holes, thisArg, array-likes",
		`function run() { const seen = []; const r = [1, , 3].findLast(function (v, i) { seen.push(i); return v === this.want }, {want: 1}); return [r, seen, Array.prototype.findLastIndex.call({length: 3, 2: 'x'}, v => v === 'x'), [].findLast(() => true) === undefined] }`,
		`[1,[2,1,0],2,true]`},
	{"findLast with a non-callable predicate is a TypeError",
		`function run() { try { [1].findLast(1); return 'no' } catch (e) { return e.name } }`,
		`"TypeError"`},
	{"toSorted: default order, comparator, holes become undefined, original untouched",
		`function run() { const a = [10, 9, 1, , undefined]; const s = a.toSorted(); return [s.length, s.slice(0, 3), s[3] === undefined, s[4] === undefined, 3 in s, a.length, 3 in a, [3, 1, 2].toSorted((x, y) => y - x)] }`,
		`[5,[1,10,9],true,true,true,5,false,[3,2,1]]`},
	{"toSorted with a non-callable comparator is a TypeError before reading",
		`function run() { try { [1].toSorted('nope'); return 'no' } catch (e) { return e.name } }`,
		`"TypeError"`},
	{"toReversed: holes become undefined, array-likes",
		`function run() { return [[1, , 3].toReversed().map(v => v === undefined ? 'u' : v), 1 in [1, , 3].toReversed(), Array.prototype.toReversed.call({length: 2, 0: 'a', 1: 'b'})] }`,
		`[[3,"u",1],true,["b","a"]]`},
	{"with: negative index, non-integer, RangeError out of range",
		`function run() { const r = [[1, 2, 3].with(-1, 9), [1, 2, 3].with(1.9, 9)]; for (const i of [3, -4]) { try { [1, 2, 3].with(i, 0); r.push('no') } catch (e) { r.push(e.name) } } return r }`,
		`[[1,2,9],[1,9,3],"RangeError","RangeError"]`},
	{"Error cause: present only when given, non-enumerable, any value",
		`function run() { const d = Object.getOwnPropertyDescriptor(new Error('m', {cause: 0}), 'cause'); return [d.value, d.enumerable, d.writable, d.configurable, 'cause' in new Error('m'), 'cause' in new Error('m', {}), new Error('m', {cause: undefined}).hasOwnProperty('cause'), new RangeError('r', {cause: 'c'}).cause, new TypeError('t', {cause: null}).cause, new SyntaxError('s', {cause: 1}).cause, new ReferenceError('x', {cause: 2}).cause, new EvalError('x', {cause: 3}).cause, new URIError('x', {cause: 4}).cause] }`,
		`[0,false,true,true,false,false,true,"c",null,1,2,3,4]`},
	{"Error cause on AggregateError is the third argument",
		`function run() { const e = new AggregateError([1, 2], 'many', {cause: 'why'}); return [e.message, e.errors, e.cause] }`,
		`["many",[1,2],"why"]`},
	{"Error cause reads inherited properties and works for subclasses",
		`function run() { class MyError extends Error { constructor(m, o) { super(m, o); this.name = 'MyError' } } const e = new MyError('x', Object.create({cause: 'proto'})); return [e.cause, e instanceof MyError, e instanceof Error, String(e)] }`,
		`["proto",true,true,"MyError: x"]`},
	{"structuredClone of JSON-safe values is a deep copy",
		`function run() { const v = {a: [1, 'x', null, true, {b: [2.5]}], s: '', n: -0}; const c = structuredClone(v); c.a[4].b.push(3); return [v, c, c !== v, c.a !== v.a, Object.is(c.n, -0), structuredClone(5), structuredClone(null), structuredClone('s')] }`,
		`[{"a":[1,"x",null,true,{"b":[2.5]}],"s":"","n":0},{"a":[1,"x",null,true,{"b":[2.5,3]}],"s":"","n":0},true,true,true,5,null,"s"]`},
	{"structuredClone keeps shared references and cycles",
		`function run() { const shared = {k: 1}; const v = {x: shared, y: shared}; v.self = v; const c = structuredClone(v); return [c.x === c.y, c.self === c, c.x !== shared] }`,
		`[true,true,true]`},
	{"structuredClone refuses functions and symbols",
		`function run() { const r = []; for (const v of [() => 1, Symbol('s'), {f() {}}]) { try { structuredClone(v); r.push('cloned') } catch (e) { r.push(e.name) } } return r }`,
		`["DataCloneError","DataCloneError","DataCloneError"]`},
}

func TestGuestPrelude(t *testing.T) {
	e := hostTestEngine(t)
	for _, tc := range preludeTable {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(hostCtx(t), tc.program, json.RawMessage(`{}`), nil, Options{})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			assertJSON(t, res.Value, tc.want)
		})
	}
}

// consoleCases are logged by the guest, one console.log(...args) each; the expected lines are
// Node's util.format of the same arguments: "console.log/info/warn/error/debug go to the log
// import (format arguments like Node does for strings/JSON-able values)".
const consoleCases = `const cases = [
  ['strings are printed raw, joined by spaces', ['hello', 'world']],
  ['numbers, -0, booleans, null, undefined', [1, -0, 2.5, true, null, undefined]],
  ['a small object on one line', [{a: 1, b: 'x', c: [1, 2, 3]}]],
  ['quoting of keys and strings', [{'a-b': "it's", c: 'say "hi"', d: 'both \' and "', e: 'line\nbreak'}]],
  ['nesting deeper than two levels', [{a: {b: {c: {d: 1}}}}]],
  ['arrays of more than six numbers are grouped in columns', [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]],
  ['arrays of strings grouped', [['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta']]],
  ['long objects break over lines', [{alpha: 'aaaaaaaaaaaaaaaaaaaa', beta: 'bbbbbbbbbbbbbbbbbbbbbbbb', gamma: 'cccccccccccccccccccccc', delta: 1}]],
  ['more than 100 items', [Array.from({length: 120}, (_, i) => i)]],
  ['empty containers', [{}, [], [[]], {a: {}}]],
  ['format specifiers', ['%s is %d years and %i days, %f%% sure: %j %O', 'Bob', 42.5, 3.9, 0.5, {a: 1}, [1]]],
  ['extra arguments after a format string', ['%s', 'a', 'b', {c: 1}]],
  ['a mix of nested arrays and objects', [{users: [{id: 1, name: 'ann', tags: ['a', 'b']}, {id: 2, name: 'bob', tags: []}], total: 2}]],
  ['null-prototype objects', [Object.assign(Object.create(null), {x: 1})]],
];
`

var consoleTable = []struct{ name, want string }{
	{"strings are printed raw, joined by spaces",
		"hello world"},
	{"numbers, -0, booleans, null, undefined",
		"1 -0 2.5 true null undefined"},
	{"a small object on one line",
		"{ a: 1, b: 'x', c: [ 1, 2, 3 ] }"},
	{"quoting of keys and strings",
		"{ 'a-b': \"it's\", c: 'say \"hi\"', d: `both ' and \"`, e: 'line\\nbreak' }"},
	{"nesting deeper than two levels",
		"{ a: { b: { c: [Object] } } }"},
	{"arrays of more than six numbers are grouped in columns",
		"[\n  1, 2, 3, 4,  5,\n  6, 7, 8, 9, 10\n]"},
	{"arrays of strings grouped",
		"[\n  'alpha',   'beta',\n  'gamma',   'delta',\n  'epsilon', 'zeta',\n  'eta',     'theta'\n]"},
	{"long objects break over lines",
		"{\n  alpha: 'aaaaaaaaaaaaaaaaaaaa',\n  beta: 'bbbbbbbbbbbbbbbbbbbbbbbb',\n  gamma: 'cccccccccccccccccccccc',\n  delta: 1\n}"},
	{"more than 100 items",
		"[\n   0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11,\n  12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,\n  24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n  36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,\n  48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,\n  60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71,\n  72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83,\n  84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,\n  96, 97, 98, 99,\n  ... 20 more items\n]"},
	{"empty containers",
		"{} [] [ [] ] { a: {} }"},
	{"format specifiers",
		"Bob is 42.5 years and 3 days, 0.5% sure: {\"a\":1} [ 1 ]"},
	{"extra arguments after a format string",
		"a b { c: 1 }"},
	{"a mix of nested arrays and objects",
		"{\n  users: [\n    { id: 1, name: 'ann', tags: [Array] },\n    { id: 2, name: 'bob', tags: [] }\n  ],\n  total: 2\n}"},
	{"null-prototype objects",
		"[Object: null prototype] { x: 1 }"},
}

func TestGuestConsoleFormatsLikeNode(t *testing.T) {
	e := hostTestEngine(t)
	prog := consoleCases + `
function run() { for (const [, args] of cases) console.log(...args); return cases.length }`
	res := mustRun(t, e, prog, `{}`, nil, Options{})
	if string(res.Value) != "14" || len(consoleTable) != 14 {
		t.Fatalf("ran %s cases; the table has %d", res.Value, len(consoleTable))
	}
	if len(res.Logs) != len(consoleTable) {
		t.Fatalf("got %d log lines, want %d", len(res.Logs), len(consoleTable))
	}
	for i, tc := range consoleTable {
		if got := res.Logs[i].Message; got != tc.want {
			t.Errorf("%s:\n got  %q\n want %q (Node)", tc.name, got, tc.want)
		}
		if res.Logs[i].Level != "info" {
			t.Errorf("%s: console.log has level %q, want info", tc.name, res.Logs[i].Level)
		}
	}
}

// Each console method has its level; a call that does not log never loads the formatter.
func TestGuestConsoleLevels(t *testing.T) {
	e := hostTestEngine(t)
	res := mustRun(t, e, `function run() { console.debug('d'); console.info('i'); console.log('l'); console.warn('w'); console.error('e', 1); return 0 }`, `{}`, nil, Options{})
	want := []Log{{"debug", "d"}, {"info", "i"}, {"info", "l"}, {"warn", "w"}, {"error", "e 1"}}
	if len(res.Logs) != len(want) {
		t.Fatalf("logs %v, want %v", res.Logs, want)
	}
	for i := range want {
		if res.Logs[i] != want[i] {
			t.Errorf("log %d = %+v, want %+v", i, res.Logs[i], want[i])
		}
	}
}
