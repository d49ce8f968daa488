package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// versioned is a candidate named "versioned" whose code returns {version: n}.
func versioned(t *testing.T, n string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"name": "versioned", "description": "Say which version of the code ran.",
		"source_code":   "export function run(args: any, libos: any) {\n  return { version: " + n + " };\n}\n",
		"input_schema":  map[string]any{"type": "object"},
		"output_schema": map[string]any{"type": "object"},
		"tests":         []any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// "A call of a revoked (or replaced) tool must replay with the code that made it —
// found through the tool ID's jit_registered event — never a later tool of the same
// name", and "an edited stored source (its digest no longer matches jit_proposed) is
// journal_corrupt". A fork's calls replay with the code its process_forked event
// names.
func TestReplayFindsTheCodeThatMadeTheCall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pid := w.spawn(t, engine.Direct)
	first := w.propose(t, pid, versioned(t, "1"))
	w.mustCall(t, pid, tools.RegisterName, idArg(first))
	old, err := w.callID(t, pid, "versioned", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	replay := func(pid, call string) tools.ReplayResult {
		t.Helper()
		r, err := tools.Replay(ctx, w.st, sandbox(t), pid, call, tools.ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	if err := w.k.RevokeBinding(ctx, pid, "versioned", "replaced by version 2"); err != nil {
		t.Fatal(err)
	}
	if r := replay(pid, old); r.Verdict != tools.VerdictSame {
		t.Fatalf("a call of a revoked tool replays with its own code: %s", r.Text())
	}

	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, versioned(t, "2"))))
	replaced, err := w.callID(t, pid, "versioned", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := tools.ReplayAll(ctx, w.st, sandbox(t), pid, tools.ReplayOptions{})
	if err != nil || tools.Summary(all) != "2 same, 0 different, 0 not replayable" {
		t.Fatalf("each call replays with the code that made it, not the tool now bound to the name: %+v %v", all, err)
	}
	if r := replay(pid, replaced); r.Verdict != tools.VerdictSame {
		t.Fatalf("the replacement's call: %s", r.Text())
	}

	ck, err := w.k.Checkpoint(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	child, err := w.k.Fork(ctx, ck)
	if err != nil {
		t.Fatal(err)
	}
	forked, err := w.callID(t, child, "versioned", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if r := replay(child, forked); r.Verdict != tools.VerdictSame {
		t.Fatalf("a fork's call replays with the code its binding was re-created from: %s", r.Text())
	}
	w.close()

	// The first candidate's stored source edited: its digest no longer matches.
	st := tamperedCopy(t, w.dir, func(db *pebble.DB) {
		rawReplace(t, db, storeKey("cand", pid, first), "version: 1", "version: 2")
	})
	r, err := tools.Replay(ctx, st, sandbox(t), pid, old, tools.ReplayOptions{})
	if err != nil || r.Verdict != tools.VerdictNotReplayable || r.Code != string(tools.CodeJournalCorrupt) {
		t.Fatalf("a call whose stored source was edited: %+v %v, want not_replayable with journal_corrupt", r, err)
	}
	if r, err := tools.Replay(ctx, st, sandbox(t), pid, replaced, tools.ReplayOptions{}); err != nil || r.Verdict != tools.VerdictSame {
		t.Fatalf("the other candidate's call is untouched: %+v %v", r, err)
	}

	// "Record the input/output schema digest in the jit_proposed event and check it
	// at replay": an output schema edited in the store (one the recorded value no
	// longer satisfies, so that the replay would say different) is journal_corrupt.
	st = tamperedCopy(t, w.dir, func(db *pebble.DB) {
		rawReplace(t, db, storeKey("cand", pid, first), `"output_schema":{"type":"object"}`, `"output_schema":{"type":"array"}`)
	})
	r, err = tools.Replay(ctx, st, sandbox(t), pid, old, tools.ReplayOptions{})
	if err != nil || r.Verdict != tools.VerdictNotReplayable || r.Code != string(tools.CodeJournalCorrupt) {
		t.Fatalf("a call whose stored output schema was edited: %+v %v, want not_replayable with journal_corrupt", r, err)
	}
}
