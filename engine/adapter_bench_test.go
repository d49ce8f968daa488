package engine

import (
	"testing"

	"github.com/agentlibos/libos/engine/internal/cpubench"
)

// BenchmarkAdapterNormalize: one typical OpenAI-style frame through the adapter
// (decode the frame, decode the arguments string, drop the top-level action). The
// target is ≥ 300k frames/s on one core: run with -cpu 1 and read frames/s, or frames/cpu-s
// on a machine where other work competes for the core.
func BenchmarkAdapterNormalize(b *testing.B) {
	frame := []byte(`{"id":"call_8f2a","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hello, world\",\"n\":9007199254740993,\"ok\":true,\"tags\":[\"a\",\"b\",\"c\"],\"nested\":{\"action\":\"keep\",\"list\":[1,2,3],\"none\":null},\"action\":\"echo\"}"}}`)
	lim := adapterLimits{maxDepth: DefaultMaxDepth, maxFrameBytes: 1 << 20}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	done := cpubench.Start(b, "frames")
	for b.Loop() {
		if _, err := normalizeFrame(frame, lim); err != nil {
			b.Fatal(err)
		}
	}
	done()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
