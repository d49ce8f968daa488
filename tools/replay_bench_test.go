package tools_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentlibos/libos/tools"
)

// BenchmarkReplayStoredCalls replays 1,000 stored calls of a registered tool that
// reads the clock and kv and writes kv (three syscalls each) with ReplayAll, as
// `libos replay PID --all` does, and reports the time per replayed call. The calls are
// made live once, through the whole pipeline, before the timer starts.
//
//	go test ./tools -run '^$' -bench BenchmarkReplayStoredCalls -benchtime 1x
func BenchmarkReplayStoredCalls(b *testing.B) {
	const calls = 1000
	w := newWorld(b)
	pid := w.registerCandidate(b, replayCandidate(b, "clock_visits"), "clock:now", "kv:read", "kv:write")
	for i := range calls {
		w.mustCall(b, pid, "clock_visits", fmt.Sprintf(`{"timezone":%q}`, []string{"UTC", "Europe/Paris", "Asia/Tokyo"}[i%3]))
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		rs, err := tools.ReplayAll(ctx, w.st, sandbox(b), pid, tools.ReplayOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if got := tools.Summary(rs); got != fmt.Sprintf("%d same, 0 different, 0 not replayable", calls) {
			b.Fatal(got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*calls), "µs/call")
}
