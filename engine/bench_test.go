package engine_test

import (
	"context"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/internal/cpubench"
)

// BenchmarkEchoEndToEnd: one echo call through the whole pipeline on a real store:
// tool_called deferred, ToolResult + tool_result synced (one WAL sync per call).
func BenchmarkEchoEndToEnd(b *testing.B) {
	e := newEnv(b, engine.Config{})
	pid := e.spawn(b, engine.ProcessConfig{Tools: []string{"echo"}})
	frame := []byte(`{"id":"call_8f2a","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hello, world\",\"n\":9007199254740993,\"ok\":true,\"tags\":[\"a\",\"b\"],\"nested\":{\"action\":\"keep\"}}"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	done := cpubench.Start(b, "calls")
	for b.Loop() {
		if _, err := e.k.HandleFrame(ctx, pid, frame); err != nil {
			b.Fatal(err)
		}
	}
	done()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkEchoEndToEndParallel: the same, from many goroutines on many processes, so
// concurrent syncs can share the WAL (group commit).
func BenchmarkEchoEndToEndParallel(b *testing.B) {
	e := newEnv(b, engine.Config{})
	frame := []byte(`{"name":"echo","input":{"text":"hello","n":1}}`)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		pid := e.spawn(b, engine.ProcessConfig{Tools: []string{"echo"}})
		for pb.Next() {
			if _, err := e.k.HandleFrame(context.Background(), pid, frame); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
