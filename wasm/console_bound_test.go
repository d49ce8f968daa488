package wasm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// consoleLine is the guest's console line bound: a longer line shows its first
// consoleLine characters and an ellipsis.
const consoleLine = 64 << 10

func cutLine(s string) string {
	if len(s) > consoleLine { // ASCII only in these cases: bytes are characters
		return s[:consoleLine] + "…"
	}
	return s
}

// "A line longer than MAX_LINE shows its first MAX_LINE characters and an ellipsis, so the
// work stops where the line does [...] The line is always the whole format's line, cut;
// what lies past the cut is never formatted." Each case is a console.log whose line is
// known whole; the guest's line must be that line, cut, at and around the bound, through
// '%%', '%c', consumed and unconsumed directives and arguments after the format.
func TestGuestConsoleLinesAreTheWholeLineCut(t *testing.T) {
	e := hostTestEngine(t)
	r := strings.Repeat
	cases := []struct {
		name, args string // args: the JavaScript argument list of console.log
		whole      string // the line before the cut
	}{
		{"a 4 MiB string", `'x'.repeat(4 << 20)`, r("x", 4<<20)},
		{"a line of exactly the bound is not cut", `'q'.repeat(65536)`, r("q", 65536)},
		{"one character more is", `'%s', 'q'.repeat(65537)`, r("q", 65537)},
		{"'%%' before a long text", `'%%' + 'x'.repeat(1 << 20)`, "%" + r("x", 1<<20)},
		{"'%%' all the way", `'%%'.repeat(200000)`, r("%", 200000)},
		{"'%c' consumes its argument and shows nothing", `'%c'.repeat(1000) + 'z'.repeat(200000), ...Array(1000).fill('color: red')`, r("z", 200000)},
		{"'%c%s%%' then a long text", `'%c%s%%' + 'y'.repeat(70000), 'css', 'A'`, "A%" + r("y", 70000)},
		{"a long substituted string", `'<%s>', 'w'.repeat(100000)`, "<" + r("w", 100000) + ">"},
		{"arguments after the format", `'a', 'x'.repeat(1 << 20), {k: 1}`, "a " + r("x", 1<<20) + " { k: 1 }"},
		{"a long argument after a short one", `1, '%s', 'v'.repeat(70000)`, "1 %s " + r("v", 70000)},
		{"directives past the bound are not run", `'x'.repeat(70000) + '%s%j', 'never', 'seen'`, r("x", 70000) + "never \"seen\""},
		{"a directive without an argument stays as it is", `'%s %s %x ' + 'u'.repeat(70000), 'one'`, "one %s %x " + r("u", 70000)},
		{"'%j' of undefined", `'%j|%j', undefined, {a: [1]}`, `undefined|{"a":[1]}`},
		{"an unknown directive is text", `'%x %s', 'a'`, "%x a"},
		{"a trailing '%'", `'100%', 'b'`, "100% b"},
	}
	// The wall time is generous: what is checked is the line, and the work is checked by
	// fuel below, which no load changes.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, e, fmt.Sprintf(`function run() { console.log(%s); return 0 }`, tc.args), `{}`, nil,
				Options{Limits: Limits{LogBytes: 1 << 20, WallTime: time.Minute}})
			if len(res.Logs) != 1 {
				t.Fatalf("%d log lines, want 1", len(res.Logs))
			}
			got, want := res.Logs[0].Message, cutLine(tc.whole)
			if got != want {
				t.Errorf("line of %d bytes, want %d; first difference at byte %d", len(got), len(want), firstDiff([]byte(got), []byte(want)))
			}
		})
	}
}

// "The work stops where the line does": logging 4 MiB, as a string, as the text of a format
// or as a substituted argument, costs about what logging a line just over the bound costs,
// not 64 times more. Fuel is deterministic, so the comparison is exact on every machine.
func TestGuestConsoleWorkStopsAtTheLineBound(t *testing.T) {
	e := hostTestEngine(t)
	fuel := func(logArgs string) int64 {
		t.Helper()
		// The string is built before the log, in both programs alike, and its building is
		// measured apart and taken off, so that only the log's work is compared.
		prog := fmt.Sprintf(`function run(a) { const s = 'x'.repeat(a.n); if (a.log) console.log(%s); return 0 }`, logArgs)
		var used [2]int64
		for i, log := range []bool{false, true} {
			res := mustRun(t, e, prog, fmt.Sprintf(`{"n": %d, "log": %t}`, 4<<20, log), nil,
				Options{Limits: Limits{LogBytes: 1 << 20, Fuel: 1 << 40, WallTime: time.Minute}})
			used[i] = res.Stats.Fuel
		}
		return used[1] - used[0]
	}
	small := func(logArgs string) int64 {
		t.Helper()
		prog := fmt.Sprintf(`function run() { const s = 'x'.repeat(65537); console.log(%s); return 0 }`, logArgs)
		base := mustRun(t, e, `function run() { const s = 'x'.repeat(65537); return 0 }`, `{}`, nil,
			Options{Limits: Limits{LogBytes: 1 << 20, Fuel: 1 << 40, WallTime: time.Minute}}).Stats.Fuel
		return mustRun(t, e, prog, `{}`, nil, Options{Limits: Limits{LogBytes: 1 << 20, Fuel: 1 << 40, WallTime: time.Minute}}).Stats.Fuel - base
	}
	for _, args := range []string{`s`, `'%%' + s`, `'%s', s`, `'a', s, 'b'`, `'<%s>' + s, 'c'`} {
		big, near := fuel(args), small(args)
		t.Logf("console.log(%s): 4 MiB %d units, 64 KiB + 1 %d units", args, big, near)
		if near <= 0 || big > 2*near {
			t.Errorf("console.log(%s) of 4 MiB used %d units of guest work, more than twice the %d of a line just over the bound", args, big, near)
		}
	}
}
