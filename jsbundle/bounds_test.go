package jsbundle

import (
	"runtime"
	"strings"
	"testing"
)

// longShapes are long but shallow expressions, at about 60 KB: each one a parser holds as
// a tree as deep as the expression is long, or that a compiler folds or guesses over
// quadratically. Every variant is refused on tokens, before esbuild runs.
var longShapes = []struct{ name, src string }{
	{"30,000-term sum", fill("export function run(a) { return 1", "+1", "}")},
	{"sum over lines, operator first", fill("export function run(a) { return 1", "\n+1", "}")},
	{"sum over lines, operator last", fill("export function run(a) { return 1", "+\n1", "}")},
	{"29,000-long member chain", fill("export function run(a) { return a", ".b", "}")},
	{"member chain over lines", fill("export function run(a) { return a", "\n.b", "}")},
	{"optional member chain", fill("export function run(a) { return a", "?.b", "}")},
	{"call chain", fill("export function run(a) { return a", "()", "}")},
	{"index chain", fill("export function run(a) { return a", "[0]", "}")},
	{"tagged template chain", fill("export function run(a) { return a", "``", "}")},
	{"7,000-deep conditional", fill("export function run(a) { return ", "a?1:", "0}")},
	{"assignment chain", fill("export function run(a) { let x; return ", "x=", "1}")},
	{"exponent chain", fill("export function run(a) { return 2", "**2", "}")},
	{"logical chain", fill("export function run(a) { return a", "&&a", "}")},
	{"nullish chain", fill("export function run(a) { return a", "??a", "}")},
	{"prefix not", fill("export function run(a) { return ", "!", "1}")},
	{"prefix minus", fill("export function run(a) { return ", "- ", "1}")},
	{"typeof chain", fill("export function run(a) { return ", "typeof ", "1}")},
	{"await chain", fill("export async function run(a) { return ", "await ", "1}")},
	{"new chain", fill("export function run(a) { return ", "new ", "a}")},
	{"string concatenation", fill("export function run(a) { return 'a'", "+'a'", "}")},
	{"comma expression", fill("export function run(a) { return (1", ",1", ")}")},
	{"arguments", fill("export function run(a) { return a(1", ",1", ")}")},
	{"parameters", fill("export function run(a) { return (a", ",b", ") => 1}")},
	{"union type", fill("type T = 1", "|1", "; export function run(a) {}")},
	{"else-if chain", fill("export function run(a) { ", "if (a) {} else ", "{} }")},
}

// "Compile-step bounds: typed source_too_complex for every shape the compiler cannot take":
// the long shapes are refused with that code, at the place past the bound, never as
// internal_error.
func TestLongExpressionsAreTooComplex(t *testing.T) {
	for _, c := range longShapes {
		prog, diags := Compile(c.src, Options{})
		if prog != nil || len(diags) == 0 {
			t.Errorf("%s: compiled", c.name)
			continue
		}
		for _, d := range diags {
			if d.Code != CodeTooComplex {
				t.Errorf("%s: got %s: %s, want only %s", c.name, d.Code, d.Message, CodeTooComplex)
			}
		}
	}
}

// The same shapes, each cut into statements just within the bound, fill a 60 KB source and
// compile: the bound is on one expression, not on the program.
func TestLongExpressionsWithinBoundCompile(t *testing.T) {
	for _, c := range []struct{ name, stmt string }{
		{"sum", "x = 1" + strings.Repeat("+1", 200) + ";\n"},
		{"member chain", "x = a" + strings.Repeat(".b", 400) + ";\n"},
		{"conditional", "x = " + strings.Repeat("a?1:", 200) + "0;\n"},
		{"calls", "x = a" + strings.Repeat("()", 200) + ";\n"},
		{"comma", "x = (1" + strings.Repeat(",1", 200) + ");\n"},
		{"lines without semicolons", "x = a.b.c + d.e.f\n"},
	} {
		src := fill("export function run(a: any) { let x: any;\n", c.stmt, "return 0 }")
		if prog, diags := Compile(src, Options{}); prog == nil {
			t.Errorf("%s: rejected: %+v", c.name, diags)
		}
	}
}

// "a memory bound per compile (concurrent compiles limited so the sum stays bounded)": every
// expensive shape, refused or just within the bound and repeated to 60 KB, allocates at most
// MaxCompileAlloc in one compile. Allocation is counted, not time.
func TestCompileAllocationBounded(t *testing.T) {
	srcs := map[string]string{}
	for _, c := range longShapes {
		srcs[c.name] = c.src
	}
	for name, stmt := range map[string]string{
		"string folding":  "x = 'abcdefghijklmnopqrstuvwxyz'" + strings.Repeat("+'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz'", 250) + ";\n",
		"object literal":  "x = {" + strings.Repeat("a: 1, ", 1000) + "};\n",
		"array literal":   "x = [" + strings.Repeat("1, ", 2000) + "];\n",
		"statements":      "x;",
		"conditional 255": "x = " + strings.Repeat("a?1:", 255) + "0;\n",
		"watched globals": "x = typeof globalThis.eval" + strings.Repeat("+typeof self.require", 20) + ";\n",
	} {
		srcs[name] = fill("export function run(a: any) { let x: any;\n", stmt, "return 0 }")
	}
	for name, src := range srcs {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, diags := Compile(src, Options{})
		runtime.ReadMemStats(&after)
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d MiB", name, n>>20)
		if n > MaxCompileAlloc {
			t.Errorf("%s: one compile allocated %d MiB, over %d MiB", name, n>>20, MaxCompileAlloc>>20)
		}
		for _, d := range diags {
			if d.Code == CodeInternal {
				t.Errorf("%s: %s", name, d.Message)
			}
		}
	}
}
