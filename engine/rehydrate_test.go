package engine_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// TestRehydrateImagesAndBindings: "Kernel.Open on an existing store restores every live process and
// its committed JIT bindings exactly (same PIDs, tool IDs, names, schemas),
// recompiling programs as needed. Every tool_called event without a settlement is
// marked unknown settlement (an event of its own) and reported to the operator; it
// is never replayed."
func TestRehydrateImagesAndBindings(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	def, _ := tools.DefaultImage()
	direct := w.spawnImage(t, def)
	def.Projection = engine.Multiplexed
	mux := w.spawnImage(t, def)
	w.register(t, direct, doubler("double"))
	w.register(t, direct, noter("note"))
	w.register(t, mux, doubler("hidden_double"))
	if _, err := w.k.ActivateSkill(ctx, direct, "jit-authoring"); err != nil {
		t.Fatal(err)
	}

	type state struct {
		info     engine.ProcessInfo
		defs     []render.Tool
		bindings []store.Binding
	}
	snapshot := func() map[string]state {
		out := map[string]state{}
		for _, pid := range []string{direct, mux} {
			info, err := w.k.Process(pid)
			if err != nil {
				t.Fatal(err)
			}
			defs, _ := w.k.Tools(pid)
			bs, _ := w.k.Bindings(pid)
			out[pid] = state{info, defs, bs}
		}
		return out
	}
	before := snapshot()

	// A crash after tool_called: the call was opened and never settled.
	if _, err := w.st.Append(ctx, direct, store.EventToolCalled, json.RawMessage(`{"call_id":"call_crashed","tool":"note","args":{"key":"x","value":"y"}}`)); err != nil {
		t.Fatal(err)
	}
	w.reopen(t)

	after := snapshot()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("rehydrated state differs:\nbefore %+v\nafter  %+v", before, after)
	}
	// Bindings are callable again, through both projections.
	if got := w.mustCall(t, direct, "double", `{"n":4}`); got["n"] != float64(8) {
		t.Fatalf("double after reopen: %v", got)
	}
	if got := w.mustCall(t, mux, engine.RunJITTool, `{"tool_name":"hidden_double","arguments":{"n":3}}`); got["n"] != float64(6) {
		t.Fatalf("run_jit_tool after reopen: %v", got)
	}
	if _, err := w.call(mux, "hidden_double", `{"n":3}`); codeOf(err) != "unknown_tool" {
		t.Fatalf("a JIT name called directly in multiplexed mode after reopen: %v", err)
	}
	// The unsettled call is reported and recorded, never replayed.
	us := w.k.UnknownSettlements()
	if len(us) != 1 || us[0].PID != direct || us[0].CallID != "call_crashed" || us[0].Tool != "note" {
		t.Fatalf("UnknownSettlements = %+v", us)
	}
	evs := w.events(t, direct)
	if countType(evs, engine.EventUnknownSettlement) != 1 || field(t, lastOf(t, evs, engine.EventUnknownSettlement), "call_id") != "call_crashed" {
		t.Fatal("no unknown_settlement event for the open call")
	}
	if _, err := w.st.KVGet(direct, "x"); err == nil {
		t.Fatal("the unsettled call was replayed")
	}
	if n := countType(evs, engine.EventToolsChanged); n < 2 {
		t.Fatalf("%d tools_changed events; the rehydrated installations are not recorded", n)
	}
	if len(w.k.BindingFailures()) != 0 {
		t.Fatalf("binding failures: %v", w.k.BindingFailures())
	}
	// A second reopen finds nothing open and reports nothing new.
	w.reopen(t)
	if us := w.k.UnknownSettlements(); len(us) != 0 {
		t.Fatalf("reported again: %+v", us)
	}
}
