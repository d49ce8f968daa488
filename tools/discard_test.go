package tools_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// TestDiscardCandidate: the Skills tell the model to "stop for Host/operator cleanup
// or coordination"; the operator's cleanup of a candidate is a discard, audited, and
// "a discarded candidate cannot be validated or registered".
func TestDiscardCandidate(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pid := w.spawn(t, engine.Direct, "clock:now")
	good := candidateJSON(t, "good_clock_now.json")

	t.Run("a proposed candidate: discarded, audited, then refused by validate and register", func(t *testing.T) {
		id := w.propose(t, pid, good)
		if err := w.jit.Discard(ctx, pid, id, "operator", "superseded"); err != nil {
			t.Fatal(err)
		}
		d := last(t, w.events(t, pid), tools.EventJITDiscarded)
		if d["candidate_id"] != id || d["by"] != "operator" || d["reason"] != "superseded" || d["from_state"] != tools.StateProposed {
			t.Fatalf("jit_discarded = %v", d)
		}
		c, err := w.st.Candidate(pid, id)
		if err != nil || c.State != tools.StateDiscarded {
			t.Fatalf("candidate after the discard: %s, %v", c.State, err)
		}
		for _, step := range []string{tools.ValidateName, tools.RegisterName} {
			_, err := w.call(t, pid, step, idArg(id))
			if !errors.Is(err, tools.ErrCandidateDiscarded) {
				t.Fatalf("%s of a discarded candidate: %v, want candidate_discarded", step, err)
			}
		}
		if err := w.jit.Discard(ctx, pid, id, "operator", "again"); !errors.Is(err, tools.ErrCandidateDiscarded) {
			t.Fatalf("a second discard: %v", err)
		}
	})

	t.Run("a validated candidate: register refuses it after the discard", func(t *testing.T) {
		id := w.propose(t, pid, good)
		if out := w.mustCall(t, pid, tools.ValidateName, idArg(id)); out["ok"] != true {
			t.Fatalf("validation: %v", out)
		}
		if err := w.jit.Discard(ctx, pid, id, "operator", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := w.call(t, pid, tools.RegisterName, idArg(id)); codeOf(err) != string(tools.CodeCandidateDiscarded) {
			t.Fatalf("register of a discarded validated candidate: %v", err)
		}
		info, _ := w.k.Process(pid)
		if _, bound := info.Tools["clock_now"]; bound {
			t.Fatal("the discarded candidate was bound")
		}
	})

	t.Run("a registered candidate is not discarded; another process's is not found", func(t *testing.T) {
		id := w.propose(t, pid, good)
		w.mustCall(t, pid, tools.RegisterName, idArg(id))
		if err := w.jit.Discard(ctx, pid, id, "operator", ""); !errors.Is(err, tools.ErrAlreadyRegistered) {
			t.Fatalf("discard of a registered candidate: %v", err)
		}
		other := w.spawn(t, engine.Direct)
		if err := w.jit.Discard(ctx, other, id, "operator", ""); !errors.Is(err, tools.ErrNotFound) {
			t.Fatalf("discard through another process: %v", err)
		}
		if err := w.jit.Discard(ctx, "pid_nope", id, "operator", ""); !errors.Is(err, tools.ErrNotFound) {
			t.Fatalf("discard in an unknown process: %v", err)
		}
	})
}

// TestRevokedNameIsFreeOnlyForANewCandidate: "a revoked tool's name becomes free only
// for a genuinely new candidate". After the operator revokes a JIT tool, its own
// candidate cannot be registered again (it stays registered: there is no replace),
// nor can a discarded one of that name; a new proposal under the name registers, with
// a new tool ID.
func TestRevokedNameIsFreeOnlyForANewCandidate(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pid := w.spawn(t, engine.Direct, "clock:now")
	good := candidateJSON(t, "good_clock_now.json")
	first := w.propose(t, pid, good)
	reg := w.mustCall(t, pid, tools.RegisterName, idArg(first))
	// Proposed while the name was bound: a proposal under a bound name is refused.
	if _, err := w.call(t, pid, tools.ProposeName, good); !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("a proposal under a bound name: %v", err)
	}

	if err := w.k.RevokeBinding(ctx, pid, "clock_now", "wrong zone"); err != nil {
		t.Fatal(err)
	}
	if d := last(t, w.events(t, pid), engine.EventJITRevoked); d["by"] != "operator" || d["reason"] != "wrong zone" || d["tool_id"] != reg["tool_id"] {
		t.Fatalf("jit_revoked = %v", d)
	}
	if _, err := w.call(t, pid, "clock_now", `{"timezone":"UTC"}`); !errors.Is(err, engine.ErrUnknownTool) {
		t.Fatalf("a call of the revoked tool: %v", err)
	}
	if _, err := w.call(t, pid, tools.RegisterName, idArg(first)); !errors.Is(err, tools.ErrAlreadyRegistered) {
		t.Fatalf("registering the revoked tool's candidate again: %v, want already_registered", err)
	}
	stale := w.propose(t, pid, good)
	if err := w.jit.Discard(ctx, pid, stale, "operator", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(t, pid, tools.RegisterName, idArg(stale)); !errors.Is(err, tools.ErrCandidateDiscarded) {
		t.Fatalf("registering a discarded candidate of the freed name: %v", err)
	}
	fresh := w.propose(t, pid, good)
	again := w.mustCall(t, pid, tools.RegisterName, idArg(fresh))
	if again["name"] != "clock_now" || again["tool_id"] == reg["tool_id"] {
		t.Fatalf("the new candidate's registration: %v (the revoked one was %v)", again, reg)
	}
	if _, err := w.call(t, pid, "clock_now", `{"timezone":"UTC"}`); err != nil {
		t.Fatalf("a call of the new tool: %v", err)
	}
}
