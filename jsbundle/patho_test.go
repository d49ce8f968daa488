package jsbundle

import (
	"strings"
	"testing"
)

// fill repeats unit between head and tail up to about 60 KB, under the 64 KiB default.
func fill(head, unit, tail string) string {
	n := (60000 - len(head) - len(tail)) / len(unit)
	return head + strings.Repeat(unit, n) + tail
}

// Shapes on which esbuild's parser is superlinear (seconds to minutes at 64 KiB) are
// refused on tokens, before esbuild runs, with source_too_complex at the first place past
// the bound. The speed of the remaining shapes is measured by BenchmarkCompileAdversarial.
func TestPathologicalShapesRefused(t *testing.T) {
	const head = "export function run() { return "
	for _, c := range []struct {
		name, src string
		line, col int
	}{
		{"nested braces", fill("export function run() {\n", "{", ""), 2, 128},
		{"nested brackets", fill(head, "[", ""), 1, 32 + 127},
		{"nested templates", fill(head, "`${", ""), 1, 32 + 3*126},
		{"chained arrows", fill(head, "a=>", "1}"), 1, 32 + 3*16 + 1},
		{"chained type-argument guesses", fill(head+"[", "a<(b),", "]}"), 1, 33 + 6*128 + 1},
		{"chained comparisons", fill(head, "a<", "1}"), 1, 32 + 2*128 + 1},
		{"statements nested without braces", fill("export function run() {\n", "if(1)\n", ";}"), 66, 1},
	} {
		prog, diags := Compile(c.src, Options{})
		if prog != nil || len(diags) != 1 || diags[0].Code != CodeTooComplex || diags[0].Line != c.line || diags[0].Column != c.col {
			t.Errorf("%s: got %+v, want %s at %d:%d", c.name, diags, CodeTooComplex, c.line, c.col)
		}
	}
}

// The bounds leave readable code alone.
func TestComplexityBoundsAcceptReadableCode(t *testing.T) {
	var b strings.Builder
	b.WriteString("interface Big {\n")
	for i := 0; i < 200; i++ {
		b.WriteString("  f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "_" + strings.Repeat("y", i/26) + ": Map<string, Array<number>>;\n")
	}
	b.WriteString("}\nexport function run(args: { n: number }) {\n  let r = 0;\n")
	for i := 0; i < 200; i++ {
		b.WriteString("  if (args.n === " + strings.Repeat("1", 1+i%5) + ") { r += 1; } else if (args.n < 0) r -= 1;\n")
	}
	b.WriteString("  const f = (a: number) => (b: number) => (c: number) => a + b + c;\n  return { r, v: f(1)(2)(3) };\n}\n")
	if prog, diags := Compile(b.String(), Options{}); prog == nil {
		t.Fatalf("rejected: %+v", diags)
	}
}
