package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// logReplicator is an in-process replicated log: it numbers batches in order, keeps
// the position of each process, and can refuse.
type logReplicator struct {
	log    []Replicated
	pos    map[string]uint64
	refuse error
}

func (l *logReplicator) Replicate(_ context.Context, b *Batch) (string, uint64, error) {
	if l.refuse != nil {
		return "", 0, l.refuse
	}
	pid := b.PIDs[0]
	for i, p := range b.PIDs {
		if b.Positions[i] > 0 {
			pid = p
		}
	}
	seq := uint64(len(l.log) + 1)
	l.log = append(l.log, Replicated{Pos: seq, PID: pid, Prev: l.pos[pid], Ops: b.Ops})
	l.pos[pid] = seq
	return pid, seq, nil
}

// writerAndFollower opens a store that replicates to an in-process log, and one that
// applies that log; both close at the test's end.
func writerAndFollower(t *testing.T) (*logReplicator, *Store, *Store) {
	t.Helper()
	rep := &logReplicator{pos: map[string]uint64{}}
	a, err := Open(t.TempDir(), Options{Replicator: rep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return rep, a, b
}

// doc.go: "Each Update is one batch: … present whole or absent". With a Replicator, a
// batch goes to the replicated log before it is applied: a refused batch is not
// applied, and another store that applies the log in order holds the same events,
// chain and records, and skips a batch it already has.
func TestReplicatedBatchesApplyElsewhere(t *testing.T) {
	ctx := context.Background()
	rep, a, b := writerAndFollower(t)
	for i := 0; i < 5; i++ {
		if _, err := a.Append(ctx, "p1", "note", json.RawMessage(`{"i":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.KVPut(ctx, "p1", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.KVDelete(ctx, "p1", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "p2", EventToolCalled, json.RawMessage(`{"call_id":"c"}`)); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("no quorum")
	rep.refuse = refused
	if _, err := a.Append(ctx, "p1", "lost", nil); !errors.Is(err, refused) {
		t.Fatalf("a refused batch: %v", err)
	}
	rep.refuse = nil
	if h, _ := a.Head("p1"); h.Seq != 5 {
		t.Fatalf("a refused batch was applied: head %d", h.Seq)
	}
	for _, r := range rep.log {
		if ok, err := b.ApplyReplicated(ctx, r); err != nil || !ok {
			t.Fatalf("apply %d: %v %v", r.Pos, ok, err)
		}
		if ok, _ := b.ApplyReplicated(ctx, r); ok {
			t.Fatalf("batch %d applied twice", r.Pos)
		}
	}
	for _, pid := range []string{"p1", "p2"} {
		ea, _ := a.Events(pid, 0, 0)
		eb, _ := b.Events(pid, 0, 0)
		if len(ea) != len(eb) || string(ea[len(ea)-1].Hash) != string(eb[len(eb)-1].Hash) {
			t.Fatalf("%s: %d events here, %d there", pid, len(ea), len(eb))
		}
		if err := b.Verify(pid); err != nil {
			t.Fatal(err)
		}
		pa, _ := a.Position(pid)
		pb, _ := b.Position(pid)
		if pa != pb || pa == 0 {
			t.Fatalf("%s: position %d here, %d there", pid, pa, pb)
		}
	}
	if open, _ := b.Unsettled("p2"); len(open) != 1 {
		t.Fatalf("the open call did not travel: %v", open)
	}
	if _, err := b.KVGet("p1", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the delete did not travel: %v", err)
	}
	// A batch that does not follow this copy's position is a fork of the log.
	bad := Replicated{Pos: 100, PID: "p1", Prev: 1, Ops: EmptyBatch()}
	if _, err := b.ApplyReplicated(ctx, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a forked batch: %v", err)
	}
	// A batch that writes this host's own bookkeeping is refused.
	evil := Replicated{Pos: 101, PID: "p1", Prev: rep.pos["p1"], Ops: append(EmptyBatch(), append([]byte{opSet, 11}, "meta\x00format"...)...)}
	if _, err := b.ApplyReplicated(ctx, evil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a batch writing meta: %v", err)
	}
}

// Replicated.Skip: "Nothing of it is written; PID's position moves to Pos, since the
// log's compare-and-set of PID's next batch expects it there." CheckOps tells the
// batches ApplyReplicated can read from the ones it refuses, without writing.
func TestSkippedMessageMovesOnlyThePosition(t *testing.T) {
	ctx := context.Background()
	rep, a, b := writerAndFollower(t)
	if _, err := a.Append(ctx, "p1", "note", json.RawMessage(`{"i":1}`)); err != nil {
		t.Fatal(err)
	}
	first := rep.log[0]
	if err := CheckOps(first.Ops); err != nil {
		t.Fatalf("CheckOps of a batch the store wrote: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("garbage"), append(EmptyBatch(), 1, 200), append(EmptyBatch(), append([]byte{opSet, 11}, "meta\x00format"...)...), append(EmptyBatch(), 9, 1, 'x')} {
		if err := CheckOps(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("CheckOps(%q) = %v, want corrupt", bad, err)
		}
	}
	if _, err := b.ApplyReplicated(ctx, first); err != nil {
		t.Fatal(err)
	}
	// A message at 5 that is not a batch: skipped, whatever it holds.
	if ok, err := b.ApplyReplicated(ctx, Replicated{Pos: 5, PID: "p1", Prev: 99, Ops: []byte("garbage"), Skip: true}); err != nil || ok {
		t.Fatalf("skip: %v %v", ok, err)
	}
	if pos, _ := b.Position("p1"); pos != 5 {
		t.Fatalf("position %d after the skip, want 5", pos)
	}
	if applied, _ := b.Applied(); applied != 5 {
		t.Fatalf("applied %d after the skip, want 5", applied)
	}
	if evs, _ := b.Events("p1", 0, 0); len(evs) != 1 {
		t.Fatalf("%d events after the skip, want 1", len(evs))
	}
	// The next batch of p1 follows the skipped message.
	next := Replicated{Pos: 6, PID: "p1", Prev: 5, Ops: EmptyBatch()}
	if ok, err := b.ApplyReplicated(ctx, next); err != nil || !ok {
		t.Fatalf("the batch after the skip: %v %v", ok, err)
	}
	if err := b.Verify("p1"); err != nil {
		t.Fatal(err)
	}
}
