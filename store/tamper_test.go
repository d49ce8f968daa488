package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func tamperStore(t *testing.T, n int) *Store {
	s, _ := openMem(t)
	for i := 1; i <= n; i++ {
		mustAppend(t, s, "p", "note", fmt.Sprintf(`{"i":%d,"s":"<x>"}`, i))
	}
	mustAppend(t, s, "other", "note", `{}`)
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
	return s
}

func rawGet(t *testing.T, s *Store, k []byte) []byte {
	t.Helper()
	v, c, err := s.db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return append([]byte(nil), v...)
}

func rawSet(t *testing.T, s *Store, k, v []byte) {
	t.Helper()
	if err := s.db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func wantVerifyAt(t *testing.T, s *Store, seq uint64) {
	t.Helper()
	err := s.Verify("p")
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify = %v, want a VerifyError at seq %d", err, seq)
	}
	if ve.Seq != seq || ve.PID != "p" {
		t.Fatalf("Verify failed at %s/%d (%s), want seq %d", ve.PID, ve.Seq, ve.Reason, seq)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("VerifyError does not match ErrCorrupt")
	}
}

// "Tamper test: flipping one byte of any stored event ... makes Verify fail at that
// sequence number." Every byte of every event is flipped, one at a time, with
// several masks (a case flip included: Go's JSON decoder folds key case).
func TestTamperFlipByte(t *testing.T) {
	const n = 6
	s := tamperStore(t, n)
	flips := 0
	for seq := uint64(1); seq <= n; seq++ {
		k := eventKey("p", seq)
		orig := rawGet(t, s, k)
		for i := range orig {
			for _, mask := range []byte{0x01, 0x20, 0x80} {
				v := append([]byte(nil), orig...)
				v[i] ^= mask
				rawSet(t, s, k, v)
				wantVerifyAt(t, s, seq)
				flips++
			}
		}
		rawSet(t, s, k, orig)
		if err := s.Verify("p"); err != nil {
			t.Fatalf("restored: %v", err)
		}
	}
	if err := s.Verify("other"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d single-byte flips detected", flips)
}

// "deleting one ... makes Verify fail at that sequence number", including the last
// event (caught by the head record).
func TestTamperDelete(t *testing.T) {
	const n = 6
	s := tamperStore(t, n)
	for seq := uint64(1); seq <= n; seq++ {
		k := eventKey("p", seq)
		orig := rawGet(t, s, k)
		if err := s.db.Delete(k, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		wantVerifyAt(t, s, seq)
		rawSet(t, s, k, orig)
	}
	// Removing the head record leaves events beyond the (empty) head: caught at 1.
	h := rawGet(t, s, headKey("p"))
	if err := s.db.Delete(headKey("p"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	wantVerifyAt(t, s, 1)
	rawSet(t, s, headKey("p"), h)
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}

// "... or swapping two makes Verify fail at that sequence number" (the lower one).
func TestTamperSwap(t *testing.T) {
	const n = 6
	s := tamperStore(t, n)
	for i := uint64(1); i <= n; i++ {
		for j := i + 1; j <= n; j++ {
			vi, vj := rawGet(t, s, eventKey("p", i)), rawGet(t, s, eventKey("p", j))
			rawSet(t, s, eventKey("p", i), vj)
			rawSet(t, s, eventKey("p", j), vi)
			wantVerifyAt(t, s, i)
			rawSet(t, s, eventKey("p", i), vi)
			rawSet(t, s, eventKey("p", j), vj)
		}
	}
	// An event moved in from another process's log.
	rawSet(t, s, eventKey("p", 1), rawGet(t, s, eventKey("other", 1)))
	wantVerifyAt(t, s, 1)
}

// "Concurrent appends from many goroutines are safe and stay dense and ordered per
// process."
func TestConcurrentAppends(t *testing.T) {
	s, _ := openMem(t)
	const writers, each = 16, 40
	var wg sync.WaitGroup
	got := make([][]uint64, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				pid := "shared"
				if i%4 == 3 {
					pid = fmt.Sprintf("own-%d", w)
				}
				e, err := s.Append(ctx, pid, "note", []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
				if err != nil {
					t.Error(err)
					return
				}
				if pid == "shared" {
					got[w] = append(got[w], e.Seq)
				}
			}
		}()
	}
	wg.Wait()
	for w, seqs := range got {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("writer %d saw seqs out of order: %v", w, seqs)
			}
		}
	}
	es, err := s.Events("shared", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != writers*each*3/4 {
		t.Fatalf("shared has %d events", len(es))
	}
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			t.Fatalf("not dense at %d: %d", i, e.Seq)
		}
	}
	if err := s.Verify("shared"); err != nil {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		if err := s.Verify(fmt.Sprintf("own-%d", w)); err != nil {
			t.Fatal(err)
		}
	}
}
