package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// "A kernel opened on a read-only store writes nothing: it restores every live
// process, installs its JIT tools without recording their rehydration, reports the
// calls left open without recording an unknown_settlement, and shows a pending
// approval whose deadline passed as expired without recording it. Every write fails
// with read_only, never a panic. The next writable open records all of it."
func TestKernelOnReadOnlyStoreWritesNothing(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	def, _ := tools.DefaultImage()
	pid := w.spawnImage(t, def)
	w.register(t, pid, doubler("double"))
	// A crash after tool_called, and an approval whose deadline passed while the
	// kernel was stopped.
	if _, err := w.st.Append(ctx, pid, store.EventToolCalled, json.RawMessage(`{"call_id":"call_crashed","tool":"double","args":{"n":1}}`)); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"kind": "tool", "tool": "echo", "via": "model", "args": map[string]any{},
		"deadline": time.Now().Add(-time.Hour)})
	if err := w.st.Update(ctx, func(tx *store.Tx) error {
		return tx.PutApproval(store.Approval{ID: "appr_late", PID: pid, Class: string(syscalls.ApprovalOperator), Subject: "echo",
			Request: req, State: engine.ApprovalPending, Created: time.Now().Add(-2 * time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	head, err := w.st.Head(pid)
	if err != nil {
		t.Fatal(err)
	}

	w.close()
	w.readOnly = true
	w.open(t)
	if us := w.k.UnknownSettlements(); len(us) != 1 || us[0].CallID != "call_crashed" {
		t.Fatalf("UnknownSettlements = %+v", us)
	}
	defs, err := w.k.Tools(pid)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range defs {
		found = found || d.Name == "double"
	}
	if !found {
		t.Fatalf("the JIT tool is not installed: %+v", defs)
	}
	as, err := w.k.Approvals(pid)
	if err != nil || len(as) != 1 || as[0].State != engine.ApprovalExpired || as[0].DecidedBy != "timeout" {
		t.Fatalf("Approvals = %+v, %v", as, err)
	}
	if pending, err := w.k.PendingApprovals(); err != nil || len(pending) != 0 {
		t.Fatalf("PendingApprovals = %+v, %v", pending, err)
	}
	if h, err := w.st.Head(pid); err != nil || !reflect.DeepEqual(h, head) {
		t.Fatalf("the log changed: %+v, want %+v (%v)", h, head, err)
	}
	for name, write := range map[string]func() error{
		"SpawnImage": func() error { _, err := w.k.SpawnImage(ctx, def); return err },
		"Grant":      func() error { return w.k.Grant(ctx, pid, "clock:now") },
		"Pause":      func() error { return w.k.Pause(ctx, pid) },
		"Kill":       func() error { return w.k.Kill(ctx, pid) },
		"Checkpoint": func() error { _, err := w.k.Checkpoint(ctx, pid); return err },
		"call":       func() error { _, err := w.call(pid, "echo", `{"x":1}`); return err },
	} {
		if err := write(); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want read_only", name, err)
		}
	}
	if h, err := w.st.Head(pid); err != nil || !reflect.DeepEqual(h, head) {
		t.Fatalf("the log changed: %+v, want %+v (%v)", h, head, err)
	}

	w.close()
	w.readOnly = false
	w.open(t)
	evs := w.events(t, pid)
	for _, typ := range []string{engine.EventUnknownSettlement, engine.EventApprovalExpired} {
		if countType(evs, typ) != 1 {
			t.Errorf("%d %s events after the writable open, want 1", countType(evs, typ), typ)
		}
	}
	if us := w.k.UnknownSettlements(); len(us) != 1 {
		t.Fatalf("the writable open reports %+v", us)
	}
}
