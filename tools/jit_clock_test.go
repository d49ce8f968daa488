package tools_test

import (
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// "clock.now … requires the normal clock:now read authority", and time reaches the guest
// only from the host: a JIT tool's Date never reads the live clock, with or without
// clock:now. Live time comes only through the capability-checked, audited clock.now.
func TestJITDateIsNotALiveClock(t *testing.T) {
	src := `export function run(args: { n: number }) { return { ms: Date.now(), iso: new Date().toISOString() }; }`
	want := float64(tools.ValidationTime.UnixMilli())
	for _, caps := range [][]string{nil, {"clock:now"}} {
		w := newWorld(t)
		pid := w.spawn(t, engine.Direct, caps...)
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "wall", src, `{"type":"object"}`))))
		out := w.mustCall(t, pid, "wall", `{"n":1}`)
		if ms, _ := out["ms"].(float64); ms != want {
			t.Fatalf("capabilities %v: Date.now() = %v, want the fixed clock %v", caps, out["ms"], want)
		}
		if iso, _ := out["iso"].(string); iso != "2026-01-02T03:04:05.000Z" {
			t.Fatalf("capabilities %v: new Date() = %v", caps, out["iso"])
		}
	}
}
