package jsbundle

import (
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkCompile200Lines measures compile + check of a 200-line candidate (target:
// p50 ≤ 5 ms). It reports the median and the 99th percentile of single compiles besides
// the mean that ns/op shows.
func BenchmarkCompile200Lines(b *testing.B) {
	data, err := os.ReadFile("testdata/bench_candidate.ts")
	if err != nil {
		b.Fatal(err)
	}
	src := string(data)
	if n := strings.Count(src, "\n"); n < 200 {
		b.Fatalf("candidate has %d lines, want 200", n)
	}
	if p, d := Compile(src, Options{}); p == nil || len(d) != 0 {
		b.Fatalf("benchmark candidate rejected: %+v", d)
	}
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		Compile(src, Options{})
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCompileAdversarial measures 60 KB sources of shapes that pass the complexity
// bounds but are heavy for a parser, to show the cost a hostile source can still impose.
func BenchmarkCompileAdversarial(b *testing.B) {
	const head = "export function run() {\n"
	for _, c := range []struct{ name, src string }{
		{"evals", fill(head, "eval;", "}\n")},
		{"redeclarations", fill(head, "let a=1;", "}\n")},
		{"comparisons", fill(head, "a<b;", "}\n")},
		{"bracket_runs", fill(head, strings.Repeat("[", 100)+strings.Repeat("]", 100)+";", "}\n")},
		{"arrow_runs", fill(head, strings.Repeat("a=>", 16)+"1;", "}\n")},
		{"type_guesses", fill(head+"[", strings.Repeat("a<(b),", 127)+"1];[", "1]}\n")},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				Compile(c.src, Options{})
			}
		})
	}
}
