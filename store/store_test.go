package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlibos/libos/liberr"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var ctx = context.Background()

// fixedClock returns a clock that advances one millisecond per call.
func fixedClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openMem(t testing.TB) (*Store, vfs.FS) {
	t.Helper()
	fs := vfs.NewMem()
	s, err := Open("/data", Options{FS: fs, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, fs
}

func mustAppend(t testing.TB, s *Store, pid, typ, data string) Event {
	t.Helper()
	e, err := s.Append(ctx, pid, typ, json.RawMessage(data))
	if err != nil {
		t.Fatalf("append %s %s: %v", typ, data, err)
	}
	return e
}

func wantCode(t testing.TB, err error, code Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", code)
	}
	if liberr.CodeOf(err) != code {
		t.Fatalf("want %s error, got %v (code %q)", code, err, liberr.CodeOf(err))
	}
	if !errors.Is(err, &Error{Code: code}) {
		t.Fatalf("errors.Is(%v, %s) = false", err, code)
	}
}

// "Event log: append-only per process, dense sequence numbers, each event carries
// prev_hash and its own hash."
func TestAppendDenseChained(t *testing.T) {
	s, _ := openMem(t)
	var prev Event
	for i := 1; i <= 5; i++ {
		e := mustAppend(t, s, "p1", "note", fmt.Sprintf(`{"i": %d}`, i))
		if e.Seq != uint64(i) {
			t.Fatalf("seq = %d, want %d", e.Seq, i)
		}
		if i == 1 && string(e.PrevHash) != string(zeroHash) {
			t.Fatalf("first prev_hash = %x, want zeros", e.PrevHash)
		}
		if i > 1 && string(e.PrevHash) != string(prev.Hash) {
			t.Fatalf("prev_hash of %d does not link to %d", i, i-1)
		}
		if string(e.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("data not compacted: %s", e.Data)
		}
		prev = e
	}
	mustAppend(t, s, "p2", "note", `{}`)
	if err := s.Verify("p1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify("p2"); err != nil {
		t.Fatal(err)
	}
	h, err := s.Head("p1")
	if err != nil || h.Seq != 5 || string(h.Hash) != string(prev.Hash) {
		t.Fatalf("head = %+v, %v", h, err)
	}
	got, err := s.Events("p1", 0, 0)
	if err != nil || len(got) != 5 {
		t.Fatalf("events = %d, %v", len(got), err)
	}
	if string(got[4].Hash) != string(prev.Hash) || !got[4].Time.Equal(prev.Time) {
		t.Fatalf("read back %+v, appended %+v", got[4], prev)
	}
}

func TestAppendRejectsBadData(t *testing.T) {
	s, _ := openMem(t)
	for _, tc := range []struct{ name, typ, data string }{
		{"event data must be a JSON object: array", "note", `[1]`},
		{"event data must be a JSON object: scalar", "note", `1`},
		{"malformed JSON", "note", `{"a":`},
		{"duplicate top-level key", "note", `{"a":1,"a":2}`},
		{"invalid UTF-8", "note", "{\"a\":\"\xff\"}"},
		{"tool_called needs call_id", EventToolCalled, `{}`},
		{"tool_result needs a string call_id", EventToolResult, `{"call_id":7}`},
		{"call_id must not be empty", EventToolFailed, `{"call_id":""}`},
		{"call_id is case-sensitive: CALL_ID is not call_id", EventToolCalled, `{"CALL_ID":"c"}`},
		{"empty type", "", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Append(ctx, "p", tc.typ, json.RawMessage(tc.data))
			wantCode(t, err, CodeInvalid)
		})
	}
	if h, _ := s.Head("p"); h.Seq != 0 {
		t.Fatalf("rejected appends left events: head %d", h.Seq)
	}
}

// Stored JSON keeps the exact bytes that were hashed (no HTML escaping).
func TestAppendHTMLCharactersVerify(t *testing.T) {
	s, _ := openMem(t)
	mustAppend(t, s, "p", "note", `{"s":"<a>&b\u2028 é"}`)
	mustAppend(t, s, "p", "note", "{\"s\":\"<a>&b\u2028\"}")
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}
