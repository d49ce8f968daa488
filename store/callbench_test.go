package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCallWrites is what a registered JIT call writes, without the sandbox:
// tool_called deferred, one syscall's journal entry and audit event deferred, then the
// ToolResult and tool_result synced (the settlement, which acknowledges the call and
// makes the deferred writes durable with it). Concurrent calls share WAL syncs. It
// reports calls/s, the p50 and p99 latency and the process CPU per call.
func BenchmarkCallWrites(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			warmUp(b, s)
			var id atomic.Int64
			durs := make([]time.Duration, b.N)
			var slot atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			runConcurrent(b, conc, func() func() error {
				return func() error {
					start := time.Now()
					if err := benchCall(s, "bench", fmt.Sprintf("call_%032x", id.Add(1))); err != nil {
						return err
					}
					durs[slot.Add(1)-1] = time.Since(start)
					return nil
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
			if err := s.Verify("bench"); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchCall writes one call as the kernel and the syscall router do.
func benchCall(s *Store, pid, call string) error {
	called := json.RawMessage(`{"action":"clock_now","arg_bytes":19,"args":{"timezone":"UTC"},"call_id":"` + call + `","kind":"jit","tool":"clock_now","tool_id":"tool_0123456789abcdef0123456789abcdef","via":"model"}`)
	if err := s.UpdateDeferred(ctx, func(tx *Tx) error {
		_, err := tx.Append(pid, EventToolCalled, called)
		return err
	}); err != nil {
		return err
	}
	if err := s.UpdateDeferred(ctx, func(tx *Tx) error {
		sum, err := tx.PutJournal(JournalEntry{PID: pid, CallID: call, Route: "clock.now", Args: json.RawMessage(`{"timezone":"UTC"}`), ArgsBytes: 19,
			ArgsSHA256: "5d6f0c2d4b3a29181706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0",
			Result:     json.RawMessage(`{"iso8601":"2026-12-01T21:00:00Z","timezone":"UTC","unix_seconds":1796158800}`), ResultBytes: 78,
			ResultSHA256: "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"})
		if err != nil {
			return err
		}
		_, err = tx.Append(pid, "syscall", json.RawMessage(`{"route":"clock.now","decision":"allowed","capability":"clock:now","call_id":"`+call+`","journal":{"index":0,"sha256":"`+sum+`"}}`))
		return err
	}); err != nil {
		return err
	}
	res := json.RawMessage(`{"iso8601":"2026-12-01T21:00:00Z","timezone":"UTC","unix_seconds":1796158800}`)
	return s.Update(ctx, func(tx *Tx) error {
		if err := tx.PutToolResult(ToolResult{PID: pid, CallID: call, Tool: "clock_now", Structured: res, Text: string(res)}); err != nil {
			return err
		}
		_, err := tx.Append(pid, EventToolResult, json.RawMessage(`{"call_id":"`+call+`","result_bytes":78,"result_sha256":"0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9","tool":"clock_now"}`))
		return err
	})
}

// cpuTime is the CPU time this process has used (every goroutine, the GC and
// Pebble's background work included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
