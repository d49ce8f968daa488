package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// Append takes the head of a log from a cache of the batches applied since Open. The
// log's guarantees must hold as if it read the head record every time: "Each process
// has an append-only log with dense sequence numbers from 1. Each event carries
// prev_hash (the hash of the previous event ...)".
func TestHeadCacheKeepsTheChain(t *testing.T) {
	ctx := context.Background()
	s, _ := openMem(t)
	first := mustAppend(t, s, "p", "note", `{"n":1}`)

	t.Run("a discarded batch leaves no head behind", func(t *testing.T) {
		boom := errors.New("boom")
		err := s.Update(ctx, func(tx *Tx) error {
			if _, err := tx.Append("p", "note", []byte(`{"n":"discarded"}`)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want boom", err)
		}
		e := mustAppend(t, s, "p", "note", `{"n":2}`)
		if e.Seq != 2 || !bytes.Equal(e.PrevHash, first.Hash) {
			t.Fatalf("after a discarded batch: seq %d prev %x, want 2 and %x", e.Seq, e.PrevHash, first.Hash)
		}
	})

	t.Run("an event handed out does not alias the cached head", func(t *testing.T) {
		e := mustAppend(t, s, "p", "note", `{"n":3}`)
		want := bytes.Clone(e.Hash)
		for i := range e.Hash {
			e.Hash[i] ^= 0xff
		}
		next := mustAppend(t, s, "p", "note", `{"n":4}`)
		if !bytes.Equal(next.PrevHash, want) {
			t.Fatalf("prev_hash %x, want %x (the stored hash of seq %d)", next.PrevHash, want, e.Seq)
		}
		next.PrevHash[0] ^= 0xff
		if e := mustAppend(t, s, "p", "note", `{"n":5}`); e.Seq != next.Seq+1 {
			t.Fatalf("seq %d, want %d", e.Seq, next.Seq+1)
		}
	})

	t.Run("several appends to one log in one batch", func(t *testing.T) {
		err := s.Update(ctx, func(tx *Tx) error {
			for i := range 3 {
				if _, err := tx.Append("p", "note", []byte(fmt.Sprintf(`{"batch":%d}`, i))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("more logs than the cache holds", func(t *testing.T) {
		err := s.UpdateDeferred(ctx, func(tx *Tx) error {
			for i := range maxCachedHeads + 10 {
				if _, err := tx.Append(fmt.Sprintf("q%d", i), "note", []byte(`{}`)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			mustAppend(t, s, fmt.Sprintf("q%d", i), "note", `{}`)
		}
		mustAppend(t, s, "p", "note", `{"n":6}`)
		for _, pid := range []string{"q0", "q1", "q2", fmt.Sprintf("q%d", maxCachedHeads+9)} {
			if err := s.Verify(pid); err != nil {
				t.Fatalf("Verify(%s) = %v", pid, err)
			}
		}
	})

	// Whatever the cache held, the stored chain verifies and ends at the head record,
	// also after a reopen, which starts with an empty cache.
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
	h, err := s.Head("p")
	if err != nil {
		t.Fatal(err)
	}
	if h.Seq != 9 {
		t.Fatalf("head seq %d, want 9 (dense: 1..9)", h.Seq)
	}
	evs, err := s.Events("p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}
