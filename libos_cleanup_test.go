package libos_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/tools"
)

// The Skills tell the model to "stop for Host/operator cleanup or coordination"; an
// embedder has that cleanup on System: DiscardCandidate beside the kernel's
// Bindings, RevokeBinding, Pause, Resume and Kill. A discarded candidate "cannot be
// validated or registered", and each cleanup is in the process's log by the operator.
func TestSystemCleanup(t *testing.T) {
	ctx := context.Background()
	sys := open(t, t.TempDir())
	defer sys.Close()
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(addCandidate))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		CandidateID string `json:"candidate_id"`
	}
	_ = json.Unmarshal(res.Structured, &p)
	if err := sys.DiscardCandidate(ctx, pid, p.CandidateID, "superseded"); err != nil {
		t.Fatal(err)
	}
	_, err = sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(`{"candidate_id":"`+p.CandidateID+`"}`))
	if !errors.Is(err, tools.ErrCandidateDiscarded) {
		t.Fatalf("register of a discarded candidate: %v", err)
	}
	register(t, sys, pid)
	if bs, err := sys.Bindings(pid); err != nil || len(bs) != 1 || bs[0].Name != "add" {
		t.Fatalf("bindings: %+v %v", bs, err)
	}
	if err := sys.RevokeBinding(ctx, pid, "add", "cleanup"); err != nil {
		t.Fatal(err)
	}
	if err := sys.Pause(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if err := sys.Resume(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if err := sys.Kill(ctx, pid); err != nil {
		t.Fatal(err)
	}
	evs, err := sys.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byOperator := map[string]bool{}
	for _, e := range evs {
		var d struct {
			By string `json:"by"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.By == "operator" {
			byOperator[e.Type] = true
		}
	}
	for _, typ := range []string{tools.EventJITDiscarded, "jit_revoked", "process_paused", "process_resumed", "process_killed"} {
		if !byOperator[typ] {
			t.Errorf("no %s event by the operator", typ)
		}
	}
}
