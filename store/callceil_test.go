package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/agentlibos/libos/internal/randid"
)

// Call-ID reuse is detected exactly, also across restarts ("tool_called opens call_id
// (an already open call_id is a conflict)"; "A call has at most one result: a second
// one is a conflict"), whether the ID sorts above every earlier one (the ceiling's
// proof, no read) or not (the lookup): IDs made by randid.Ordered as the engine makes
// them, out of order, and arbitrary; in the same batch, in later batches, after a
// discarded batch (which must not make its ID look used) and after reopening.
func TestCallIDReuseDetectedWithCeiling(t *testing.T) {
	fs := openMemFS(t)
	s := mustOpenFS(t, fs)
	openIn := func(s *Store, pid, call string) error {
		_, err := s.Append(ctx, pid, EventToolCalled, json.RawMessage(fmt.Sprintf(`{"call_id":%q,"tool":"t"}`, call)))
		return err
	}
	open := func(s *Store, call string) error { return openIn(s, "pid_1", call) }
	settle := func(s *Store, call string) error {
		return s.Update(ctx, func(tx *Tx) error {
			if err := tx.PutToolResult(ToolResult{PID: "pid_1", CallID: call, Tool: "t", Structured: json.RawMessage(`{}`), Text: "{}"}); err != nil {
				return err
			}
			_, err := tx.Append("pid_1", EventToolResult, json.RawMessage(fmt.Sprintf(`{"call_id":%q}`, call)))
			return err
		})
	}
	a, b, c := randid.Ordered("call_"), randid.Ordered("call_"), randid.Ordered("call_")
	// Opened in order, settled out of order: c's result raises the result ceiling
	// above a and b, whose results must then be looked up.
	for _, id := range []string{a, b, c} {
		if err := open(s, id); err != nil {
			t.Fatal(err)
		}
		wantCode(t, open(s, id), CodeConflict)
	}
	for _, id := range []string{c, a} {
		if err := settle(s, id); err != nil {
			t.Fatal(err)
		}
		wantCode(t, settle(s, id), CodeConflict)
	}
	// Arbitrary IDs, in another process: below its ceiling, and one above every other.
	for _, id := range []string{"zz", "c1", "call_0", a} {
		if err := openIn(s, "pid_3", id); err != nil {
			t.Fatal(err)
		}
		wantCode(t, openIn(s, "pid_3", id), CodeConflict)
	}
	// Twice in one batch: the second sees the first's marker.
	d := randid.Ordered("call_")
	err := s.Update(ctx, func(tx *Tx) error {
		for range 2 {
			if _, err := tx.Append("pid_1", EventToolCalled, json.RawMessage(fmt.Sprintf(`{"call_id":%q}`, d))); err != nil {
				return err
			}
		}
		return nil
	})
	wantCode(t, err, CodeConflict)
	// The discarded batch wrote nothing: d is still new, and so is its result.
	if err := open(s, d); err != nil {
		t.Fatalf("call %s after a discarded batch: %v", d, err)
	}
	boom := errors.New("boom")
	e := randid.Ordered("call_")
	if err := s.Update(ctx, func(tx *Tx) error {
		if err := tx.PutToolResult(ToolResult{PID: "pid_1", CallID: e, Structured: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := settle(s, e); err != nil {
		t.Fatalf("result of %s after a discarded batch: %v", e, err)
	}
	// Another process's ceiling is its own.
	if _, err := s.Append(ctx, "pid_2", EventToolCalled, json.RawMessage(fmt.Sprintf(`{"call_id":%q}`, d))); err != nil {
		t.Fatalf("the same call ID in another process: %v", err)
	}
	// After a restart the ceilings are read again from what was written.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenFS(t, fs)
	// b and d are still open; a and c were settled, and their results are there.
	for _, id := range []string{b, d} {
		wantCode(t, open(s, id), CodeConflict)
	}
	for _, id := range []string{"zz", "c1", a} {
		wantCode(t, openIn(s, "pid_3", id), CodeConflict)
	}
	for _, id := range []string{c, a, e} {
		wantCode(t, settle(s, id), CodeConflict)
	}
	if err := settle(s, b); err != nil {
		t.Fatalf("first result of %s after reopening: %v", b, err)
	}
	f := randid.Ordered("call_")
	if err := open(s, f); err != nil {
		t.Fatal(err)
	}
	wantCode(t, open(s, f), CodeConflict)
}

// "An entry is written once: a second entry at the same index is a conflict", with the
// journal's ceiling: entries in index order (each above the last), out of order and
// for a call below the ceiling are all checked, in one batch and after reopening.
func TestJournalReuseDetectedWithCeiling(t *testing.T) {
	fs := openMemFS(t)
	s := mustOpenFS(t, fs)
	put := func(s *Store, call string, index int) error {
		return s.Update(ctx, func(tx *Tx) error {
			_, err := tx.PutJournal(JournalEntry{PID: "pid_1", CallID: call, Index: index, Route: "clock.now", Args: json.RawMessage(`{}`)})
			return err
		})
	}
	a, b := randid.Ordered("call_"), randid.Ordered("call_")
	steps := []struct {
		call  string
		index int
	}{{a, 0}, {a, 1}, {b, 1}, {b, 0}, {a, 2}, {"c1", 0}}
	for _, st := range steps {
		if err := put(s, st.call, st.index); err != nil {
			t.Fatalf("entry %d of %s: %v", st.index, st.call, err)
		}
		wantCode(t, put(s, st.call, st.index), CodeConflict)
	}
	err := s.Update(ctx, func(tx *Tx) error {
		for range 2 {
			if _, err := tx.PutJournal(JournalEntry{PID: "pid_1", CallID: b, Index: 7, Route: "clock.now"}); err != nil {
				return err
			}
		}
		return nil
	})
	wantCode(t, err, CodeConflict)
	if err := put(s, b, 7); err != nil {
		t.Fatalf("entry 7 of %s after a discarded batch: %v", b, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenFS(t, fs)
	for _, st := range append(steps, struct {
		call  string
		index int
	}{b, 7}) {
		wantCode(t, put(s, st.call, st.index), CodeConflict)
	}
	if err := put(s, b, 8); err != nil {
		t.Fatal(err)
	}
}

func openMemFS(t testing.TB) vfs.FS {
	t.Helper()
	return vfs.NewMem()
}

func mustOpenFS(t testing.TB, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open("/data", Options{FS: fs, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
