package tools_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// spinCandidate is a JIT tool that, asked to, runs QuickJS's substring search with a
// long needle: C code that never polls, the case that once froze the whole process.
const spinCandidate = `{"name":"spin","description":"Searches for a long needle when asked to.",` +
	`"source_code":"export function run(args: { spin: boolean }) {\n  if (args.spin) return { found: 'a'.repeat(1e7).includes('a'.repeat(1e5) + 'b') };\n  return { found: false };\n}\n",` +
	`"input_schema":{"type":"object","properties":{"spin":{"type":"boolean"}},"required":["spin"],"additionalProperties":false},` +
	`"output_schema":{"type":"object","properties":{"found":{"type":"boolean"}},"required":["found"],"additionalProperties":false},` +
	`"tests":[{"args":{"spin":false},"expected":{"found":false},"syscalls":[]}]}`

// BenchmarkEchoWhileGuestSpins: "while a CPU-bound guest runs for its full limit,
// concurrent echo calls keep p99 ≤ 10 ms". Echo calls go end to end through the kernel
// (adapter, schemas, tool_called, the synced settlement), one after another, while
// another goroutine keeps calling a registered JIT tool that runs a never-polling C loop
// until its production wall time stops it. idle is the same without the spinning tool.
// Reports p50, p99 and the worst echo latency, and how many spinning calls ended
// meanwhile.
func BenchmarkEchoWhileGuestSpins(b *testing.B) {
	for _, spin := range []bool{false, true} {
		name := "idle"
		if spin {
			name = "spinning"
		}
		b.Run(name, func(b *testing.B) {
			w := newWorld(b)
			pid := w.spawn(b, engine.Direct)
			id := w.propose(b, pid, spinCandidate)
			if rep := w.mustCall(b, pid, tools.ValidateName, idArg(id)); rep["ok"] != true {
				b.Fatalf("validation: %v", rep)
			}
			w.mustCall(b, pid, tools.RegisterName, idArg(id))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var spins int
			if spin {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						w.k.HandleFrame(ctx, pid, []byte(`{"name":"spin","arguments":{"spin":true}}`))
						spins++
					}
				}()
				time.Sleep(50 * time.Millisecond) // the guest is running
			}
			frame := []byte(`{"name":"echo","arguments":{"n":1}}`)
			d := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := w.k.HandleFrame(context.Background(), pid, frame); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()), "p99-µs")
			b.ReportMetric(float64(d[len(d)-1].Microseconds()), "max-µs")
			if spin {
				b.ReportMetric(float64(spins), "spin-calls")
			}
		})
	}
}
