package tools_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// storeKey is a key of the store's layout (store/doc.go): the table, then the
// 0x00-separated parts.
func storeKey(table string, parts ...string) []byte {
	k := []byte(table)
	for _, p := range parts {
		k = append(append(k, 0), p...)
	}
	return k
}

func eventKey(pid string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(storeKey("evt", pid), 0), seq)
}

// tamperedCopy copies the closed store in dir to a new directory, lets edit change
// its bytes through Pebble itself, and opens the copy as a store.
func tamperedCopy(t *testing.T, dir string, edit func(db *pebble.DB)) *store.Store {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(cp, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(cp, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func rawGet(t *testing.T, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, c, err := db.Get(k)
	if err != nil {
		t.Fatalf("get %q: %v", k, err)
	}
	defer c.Close()
	return bytes.Clone(v)
}

func rawSet(t *testing.T, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func rawReplace(t *testing.T, db *pebble.DB, k []byte, old, new string) {
	t.Helper()
	v := rawGet(t, db, k)
	if !bytes.Contains(v, []byte(old)) {
		t.Fatalf("%q holds no %q: %s", k, old, v)
	}
	rawSet(t, db, k, bytes.Replace(v, []byte(old), []byte(new), 1))
}

// Export and replay "verify the log and check the stored result against its
// tool_result event's digest": "an edited, reordered, truncated or mixed log is
// refused with journal_corrupt". A real store's bytes are edited through Pebble; the
// untouched copy exports and replays the same, each edited one is refused.
func TestExportReplayRefuseAnEditedLog(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pid := w.registerCandidate(t, replayCandidate(t, "clock_visits"), "clock:now", "kv:read", "kv:write")
	first, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
	if err != nil {
		t.Fatal(err)
	}
	call, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
	if err != nil {
		t.Fatal(err)
	}
	other := w.spawn(t, engine.Direct)
	w.mustCall(t, other, tools.EchoName, `{"x":1}`)
	seqOf := func(typ, callID string) uint64 {
		for _, e := range w.events(t, pid) {
			if e.Type == typ && e.CallID == callID {
				return e.Seq
			}
		}
		t.Fatalf("no %s of %s", typ, callID)
		return 0
	}
	called, settled := seqOf(engine.EventToolCalled, call), seqOf(engine.EventToolResult, call)
	last := w.events(t, pid)[len(w.events(t, pid))-1].Seq
	w.close()

	// The stored result edited to visits 9, and the digest it would need.
	editResult := func(t *testing.T, db *pebble.DB) (oldSum, newSum string) {
		k := storeKey("res", pid, call)
		var rec store.ToolResult
		if err := json.Unmarshal(rawGet(t, db, k), &rec); err != nil {
			t.Fatal(err)
		}
		edited := bytes.Replace(rec.Structured, []byte(`"visits":2`), []byte(`"visits":9`), 1)
		o, n := sha256.Sum256(rec.Structured), sha256.Sum256(edited)
		rawReplace(t, db, k, `"visits":2`, `"visits":9`)
		return hex.EncodeToString(o[:]), hex.EncodeToString(n[:])
	}

	for _, tc := range []struct {
		name string
		edit func(t *testing.T, db *pebble.DB)
		// log: the whole log fails verification, and replay refuses it as an error;
		// otherwise the call is a not_replayable verdict with code journal_corrupt.
		log bool
	}{
		{"the result and its tool_result event's digest edited together", func(t *testing.T, db *pebble.DB) {
			o, n := editResult(t, db)
			rawReplace(t, db, eventKey(pid, settled), o, n)
		}, true},
		{"the call's arguments edited in its tool_called event", func(t *testing.T, db *pebble.DB) {
			rawReplace(t, db, eventKey(pid, called), `"timezone":"UTC"`, `"timezone":"UTX"`)
		}, true},
		{"two events swapped", func(t *testing.T, db *pebble.DB) {
			a, b := rawGet(t, db, eventKey(pid, called)), rawGet(t, db, eventKey(pid, called-1))
			rawSet(t, db, eventKey(pid, called), b)
			rawSet(t, db, eventKey(pid, called-1), a)
		}, true},
		{"the last event removed", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(eventKey(pid, last), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"an event of another process's log put in", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, eventKey(pid, 1), rawGet(t, db, eventKey(other, 1)))
		}, true},
		{"the stored result edited", func(t *testing.T, db *pebble.DB) { editResult(t, db) }, false},
		{"another call's result stored as this one's", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, storeKey("res", pid, call), rawGet(t, db, storeKey("res", pid, first)))
		}, false},
		{"the stored result removed", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(storeKey("res", pid, call), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tamperedCopy(t, w.dir, func(db *pebble.DB) { tc.edit(t, db) })
			if _, err := tools.ExportTape(st, pid, call); !codeIs(err, tools.CodeJournalCorrupt) {
				t.Fatalf("export: %v, want journal_corrupt", err)
			}
			r, err := tools.Replay(ctx, st, sandbox(t), pid, call, tools.ReplayOptions{})
			all, allErr := tools.ReplayAll(ctx, st, sandbox(t), pid, tools.ReplayOptions{})
			if tc.log {
				if !codeIs(err, tools.CodeJournalCorrupt) || !codeIs(allErr, tools.CodeJournalCorrupt) {
					t.Fatalf("replay: %+v %v; replay --all: %v %v; want journal_corrupt", r, err, all, allErr)
				}
				return
			}
			if err != nil || r.Verdict != tools.VerdictNotReplayable || r.Code != string(tools.CodeJournalCorrupt) {
				t.Fatalf("replay: %+v %v, want not_replayable with journal_corrupt", r, err)
			}
			if allErr != nil || len(all) != 2 || all[0].Verdict != tools.VerdictSame || all[1].Code != string(tools.CodeJournalCorrupt) {
				t.Fatalf("replay --all: %+v %v, want the first call same and this one journal_corrupt", all, allErr)
			}
		})
	}

	t.Run("untouched", func(t *testing.T) {
		st := tamperedCopy(t, w.dir, func(*pebble.DB) {})
		if _, err := tools.ExportTape(st, pid, call); err != nil {
			t.Fatalf("export: %v", err)
		}
		all, err := tools.ReplayAll(ctx, st, sandbox(t), pid, tools.ReplayOptions{})
		if err != nil || tools.Summary(all) != "2 same, 0 different, 0 not replayable" {
			t.Fatalf("replay --all: %+v %v", all, err)
		}
	})
}
