package tools_test

import (
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// JIT authoring Skill: "Date.now() and new Date() read no clock: they throw
// ambient_clock, in validation and in production alike; for the real time call
// clock.now, which needs clock:now." A registered tool that reads Date fails with a
// typed error that names the route, with or without clock:now, instead of answering
// with a made-up time; new Date(value) keeps working.
func TestJITDateIsNotAClock(t *testing.T) {
	src := `export function run(args: { n: number }) {
  if (args.n === 0) return { iso: new Date(1767323045000).toISOString() };
  return { ms: args.n === 1 ? Date.now() : new Date().getTime() };
}`
	for _, caps := range [][]string{nil, {"clock:now"}} {
		w := newWorld(t)
		pid := w.spawn(t, engine.Direct, caps...)
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "wall", src, `{"type":"object"}`))))
		if out := w.mustCall(t, pid, "wall", `{"n":0}`); out["iso"] != "2026-01-02T03:04:05.000Z" {
			t.Fatalf("new Date(value) = %v", out)
		}
		for _, n := range []string{"1", "2"} {
			_, err := w.call(t, pid, "wall", `{"n":`+n+`}`)
			if codeOf(err) != "ambient_clock" || !strings.Contains(err.Error(), `libos.syscall("clock.now"`) {
				t.Fatalf("capabilities %v, n=%s: %v; want ambient_clock naming clock.now", caps, n, err)
			}
		}
	}
	// The validator refuses the same program the same way.
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct)
	obj := withField(t, openCandidate(t, "wall", src, `{"type":"object"}`), "tests", `[{"args":{"n":1},"expected":{"ms":0},"syscalls":[]}]`)
	rep := w.mustCall(t, pid, tools.ValidateName, idArg(w.propose(t, pid, obj)))
	errs, _ := rep["errors"].([]any)
	if rep["ok"] != false || len(errs) == 0 || errs[0].(map[string]any)["code"] != "ambient_clock" {
		t.Fatalf("validation: %v", rep)
	}
}
