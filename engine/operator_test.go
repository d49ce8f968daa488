package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// TestOperatorAPI: "inspect processes, candidates (with every validation record),
// bindings, pending approvals and the event log (with hash-chain verification);
// revoke a JIT binding (an operator-only cleanup, audited; the model has no
// unregister); export a process's event log as JSON lines."
func TestOperatorAPI(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	def, _ := tools.DefaultImage()
	pid := w.spawnImage(t, def)
	toolID := w.register(t, pid, doubler("double"))
	bad := w.mustCall(t, pid, tools.ProposeName, candidate("broken", `export function run(args) { return {n: 1}; }`,
		`{"type":"object"}`, `{"type":"object"}`, `[{"args":{},"expected":{"n":2},"syscalls":[]}]`))["candidate_id"].(string)
	if rep := w.mustCall(t, pid, tools.ValidateName, `{"candidate_id":"`+bad+`"}`); rep["ok"] != false {
		t.Fatalf("the broken candidate validated: %v", rep)
	}

	cs, err := w.k.Candidates(pid)
	if err != nil || len(cs) != 2 {
		t.Fatalf("Candidates = %d, %v", len(cs), err)
	}
	for _, c := range cs {
		if len(c.Validations) != 1 || c.Validations[0].Finished.IsZero() || len(c.Validations[0].Tests) == 0 {
			t.Fatalf("candidate %s has validation records %+v", c.ID, c.Validations)
		}
		if c.ID == bad && (c.State != "rejected" || c.Validations[0].OK) {
			t.Fatalf("rejected candidate = %+v", c)
		}
	}
	bs, _ := w.k.Bindings(pid)
	if len(bs) != 1 || bs[0].ToolID != toolID {
		t.Fatalf("Bindings = %+v", bs)
	}

	// The model has no unregister; the operator revokes, audited.
	if _, err := w.call(pid, "unregister_jit_tool", `{"name":"double"}`); codeOf(err) != "unknown_tool" {
		t.Fatalf("unregister from the model: %v", err)
	}
	if err := w.k.RevokeBinding(ctx, pid, "double", "cleanup after review"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(pid, "double", `{"n":1}`); codeOf(err) != "unknown_tool" {
		t.Fatalf("a revoked tool was called: %v", err)
	}
	if bs, _ := w.k.Bindings(pid); len(bs) != 0 {
		t.Fatalf("binding kept: %+v", bs)
	}
	rev := lastOf(t, w.events(t, pid), engine.EventJITRevoked)
	if field(t, rev, "tool_id") != toolID || field(t, rev, "by") != "operator" || field(t, rev, "reason") != "cleanup after review" {
		t.Fatalf("jit_revoked = %s", rev.Data)
	}
	if err := w.k.RevokeBinding(ctx, pid, "double", ""); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	if err := w.k.RevokeBinding(ctx, pid, "echo", ""); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("revoking a built-in: %v", err)
	}
	// The name is free again, and a reopen does not bring the revoked tool back.
	w.reopen(t)
	if _, err := w.call(pid, "double", `{"n":1}`); codeOf(err) != "unknown_tool" {
		t.Fatalf("revoked tool after reopen: %v", err)
	}
	newID := w.register(t, pid, doubler("double"))
	if newID == toolID {
		t.Fatal("a new registration reused the tool ID")
	}

	// Export: JSON lines, dense sequence numbers, a hash chain anyone can follow.
	var buf bytes.Buffer
	if err := w.k.ExportEvents(pid, &buf); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	var prev string
	n := 0
	for sc.Scan() {
		var e struct {
			PID      string          `json:"pid"`
			Seq      uint64          `json:"seq"`
			Type     string          `json:"type"`
			Data     json.RawMessage `json:"data"`
			PrevHash string          `json:"prev_hash"`
			Hash     string          `json:"hash"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		n++
		if e.PID != pid || e.Seq != uint64(n) || len(e.Hash) != 64 || (n > 1 && e.PrevHash != prev) || (n == 1 && e.PrevHash != hex.EncodeToString(make([]byte, 32))) {
			t.Fatalf("line %d breaks the chain: %s", n, sc.Bytes())
		}
		prev = e.Hash
	}
	if evs := w.events(t, pid); n != len(evs) || n < 10 {
		t.Fatalf("exported %d events of %d", n, len(evs))
	}
	if err := w.k.VerifyLog(pid); err != nil {
		t.Fatal(err)
	}
	list, _ := w.k.ListProcesses()
	if len(list) != 1 || list[0].PID != pid || list[0].Image != "default" {
		t.Fatalf("ListProcesses = %+v", list)
	}
}
