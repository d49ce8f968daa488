package store

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentlibos/libos/liberr"
	"github.com/cockroachdb/pebble/v2"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/store")

// writeAllRecords writes one record of every type through the public API.
func writeAllRecords(t testing.TB, s *Store) {
	t.Helper()
	err := s.Update(ctx, func(tx *Tx) error {
		steps := []func() error{
			func() error {
				return tx.PutProcess(Process{PID: "pid_1", Image: json.RawMessage(`{"name":"img"}`), Capabilities: []string{"clock:now"}, Projection: "direct", State: "running"})
			},
			func() error {
				_, err := tx.Append("pid_1", EventToolCalled, json.RawMessage(`{"call_id":"call_1","tool":"echo"}`))
				return err
			},
			func() error {
				return tx.PutToolResult(ToolResult{PID: "pid_1", CallID: "call_1", Tool: "echo", Structured: json.RawMessage(`{"a":1}`), Text: `{"a":1}`})
			},
			func() error {
				_, err := tx.Append("pid_1", EventToolResult, json.RawMessage(`{"call_id":"call_1"}`))
				return err
			},
			func() error {
				_, err := tx.Append("pid_1", EventToolCalled, json.RawMessage(`{"call_id":"call_2"}`))
				return err
			},
			func() error {
				return tx.CreateCandidate(Candidate{ID: "tcand_1", PID: "pid_1", Name: "t", SourceCode: "export function run(){}", State: "proposed"})
			},
			func() error {
				return tx.AddBinding(Binding{PID: "pid_1", Name: "t", ToolID: "tool_1", CandidateID: "tcand_1", Scope: "ephemeral_process"})
			},
			func() error {
				return tx.PutApproval(Approval{ID: "appr_1", PID: "pid_1", Class: "write", Subject: "kv.put", State: "pending"})
			},
			func() error {
				return tx.AddCheckpoint(Checkpoint{ID: "ckpt_1", PID: "pid_1", EventSeq: 3, Snapshot: json.RawMessage(`{}`)})
			},
			func() error { _, err := tx.Charge("pid_1", "tool_calls", 1, 10); return err },
			func() error { return tx.KVPut("pid_1", "user/a", []byte(`"v"`)) },
		}
		for _, st := range steps {
			if err := st(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// "A documented, versioned key layout (store/doc.go)": the keys actually written for
// every record type match testdata/store/keys.golden.
func TestGoldenKeys(t *testing.T) {
	s, _ := openMem(t)
	writeAllRecords(t, s)
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(&b, "%q\n", it.Key())
	}
	it.Close()
	golden := filepath.Join("..", "testdata", "store", "keys.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("key layout changed (bump formatVersion and add a migration, then -update):\ngot:\n%s\nwant:\n%s", b.String(), want)
	}
	v, closer, err := s.db.Get([]byte("meta\x00format"))
	if err != nil || string(v) != "1" {
		t.Fatalf("format key = %q, %v", v, err)
	}
	closer.Close()
}

// "Unit tests for every record type": each record reads back as written, with the
// store's timestamps.
func TestRecordsRoundTrip(t *testing.T) {
	s, _ := openMem(t)
	writeAllRecords(t, s)
	p, err := s.Process("pid_1")
	if err != nil || p.Projection != "direct" || string(p.Image) != `{"name":"img"}` || p.Created.IsZero() || !p.Created.Equal(p.Updated) {
		t.Fatalf("process %+v, %v", p, err)
	}
	created := p.Created
	if err := s.Update(ctx, func(tx *Tx) error { p.State = "exited"; return tx.PutProcess(p) }); err != nil {
		t.Fatal(err)
	}
	p, _ = s.Process("pid_1")
	if p.State != "exited" || !p.Created.Equal(created) || !p.Updated.After(created) {
		t.Fatalf("PutProcess must keep Created and bump Updated: %+v", p)
	}
	ps, err := s.Processes()
	if err != nil || len(ps) != 1 || ps[0].PID != "pid_1" {
		t.Fatalf("processes %+v, %v", ps, err)
	}
	r, err := s.ToolResult("pid_1", "call_1")
	if err != nil || r.Tool != "echo" || string(r.Structured) != `{"a":1}` || r.Text != `{"a":1}` {
		t.Fatalf("tool result %+v, %v", r, err)
	}
	c, err := s.Candidate("pid_1", "tcand_1")
	if err != nil || c.State != "proposed" || c.SourceCode != "export function run(){}" {
		t.Fatalf("candidate %+v, %v", c, err)
	}
	bs, err := s.Bindings("pid_1")
	if err != nil || len(bs) != 1 || bs[0].ToolID != "tool_1" || bs[0].Scope != "ephemeral_process" {
		t.Fatalf("bindings %+v, %v", bs, err)
	}
	if b, err := s.Binding("pid_1", "t"); err != nil || b.CandidateID != "tcand_1" {
		t.Fatalf("binding %+v, %v", b, err)
	}
	a, err := s.Approval("pid_1", "appr_1")
	if err != nil || a.State != "pending" || a.Subject != "kv.put" {
		t.Fatalf("approval %+v, %v", a, err)
	}
	if err := s.Update(ctx, func(tx *Tx) error {
		a.State, a.Reason, a.Decided = "approved", "ok", tx.Now()
		return tx.PutApproval(a)
	}); err != nil {
		t.Fatal(err)
	}
	if as, err := s.Approvals("pid_1"); err != nil || len(as) != 1 || as[0].State != "approved" || as[0].Decided.IsZero() || !as[0].Created.Equal(a.Created) {
		t.Fatalf("approvals %+v, %v", as, err)
	}
	ck, err := s.Checkpoint("pid_1", "ckpt_1")
	if err != nil || ck.EventSeq != 3 {
		t.Fatalf("checkpoint %+v, %v", ck, err)
	}
	if cks, err := s.Checkpoints("pid_1"); err != nil || len(cks) != 1 {
		t.Fatalf("checkpoints %+v, %v", cks, err)
	}
	bu, err := s.Budget("pid_1", "tool_calls")
	if err != nil || bu.Used != 1 {
		t.Fatalf("budget %+v, %v", bu, err)
	}
	if bus, err := s.Budgets("pid_1"); err != nil || len(bus) != 1 {
		t.Fatalf("budgets %+v, %v", bus, err)
	}
	v, err := s.KVGet("pid_1", "user/a")
	if err != nil || string(v) != `"v"` {
		t.Fatalf("kv %q, %v", v, err)
	}
}

// "A candidate's validation attempts are kept": every attempt survives, in order.
func TestCandidateValidations(t *testing.T) {
	s, _ := openMem(t)
	if err := s.Update(ctx, func(tx *Tx) error {
		return tx.CreateCandidate(Candidate{ID: "tcand_x", PID: "p", Name: "n", State: "proposed"})
	}); err != nil {
		t.Fatal(err)
	}
	for i, ok := range []bool{false, true} {
		err := s.Update(ctx, func(tx *Tx) error {
			c, err := tx.Candidate("p", "tcand_x")
			if err != nil {
				return err
			}
			c.Validations = append(c.Validations, ValidationAttempt{OK: ok, Errors: json.RawMessage(fmt.Sprintf(`[{"code":"c%d","message":"m","line":1,"column":2}]`, i)), Started: tx.Now(), Finished: tx.Now()})
			c.State = "validated"
			return tx.PutCandidate(c)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Candidate("p", "tcand_x")
	if err != nil || len(c.Validations) != 2 || c.Validations[0].OK || !c.Validations[1].OK || string(c.Validations[1].Errors) != `[{"code":"c1","message":"m","line":1,"column":2}]` {
		t.Fatalf("candidate %+v, %v", c, err)
	}
	err = s.Update(ctx, func(tx *Tx) error { return tx.PutCandidate(Candidate{ID: "tcand_nope", PID: "p"}) })
	wantCode(t, err, CodeNotFound)
	err = s.Update(ctx, func(tx *Tx) error { return tx.CreateCandidate(Candidate{ID: "tcand_x", PID: "p"}) })
	wantCode(t, err, CodeConflict)
	err = s.Update(ctx, func(tx *Tx) error {
		return tx.CreateCandidate(Candidate{ID: "tcand_y", PID: "p", InputSchema: json.RawMessage(`{`)})
	})
	wantCode(t, err, CodeInvalid)
}

// "look up candidates by ID scoped to the owner PID (a foreign PID gets 'not
// found')": the error for a foreign candidate is identical to an unknown one.
func TestOwnershipScoping(t *testing.T) {
	s, _ := openMem(t)
	writeAllRecords(t, s)
	_, foreign := s.Candidate("pid_2", "tcand_1")
	_, unknown := s.Candidate("pid_2", "tcand_nope")
	wantCode(t, foreign, CodeNotFound)
	wantCode(t, unknown, CodeNotFound)
	if strings.ReplaceAll(foreign.Error(), "tcand_1", "X") != strings.ReplaceAll(unknown.Error(), "tcand_nope", "X") {
		t.Fatalf("foreign and unknown differ: %q vs %q", foreign, unknown)
	}
	_, err := s.Candidate("pid_2", "")
	wantCode(t, err, CodeNotFound)
	// A foreign PID cannot overwrite it either.
	err = s.Update(ctx, func(tx *Tx) error { return tx.PutCandidate(Candidate{ID: "tcand_1", PID: "pid_2"}) })
	wantCode(t, err, CodeNotFound)
	for name, f := range map[string]func() error{
		"binding":     func() error { _, err := s.Binding("pid_2", "t"); return err },
		"tool result": func() error { _, err := s.ToolResult("pid_2", "call_1"); return err },
		"approval":    func() error { _, err := s.Approval("pid_2", "appr_1"); return err },
		"checkpoint":  func() error { _, err := s.Checkpoint("pid_2", "ckpt_1"); return err },
		"kv":          func() error { _, err := s.KVGet("pid_2", "user/a"); return err },
	} {
		if err := f(); liberr.CodeOf(err) != CodeNotFound {
			t.Errorf("%s of another pid: %v, want not_found", name, err)
		}
	}
	for name, n := range map[string]func() (int, error){
		"bindings":    func() (int, error) { x, err := s.Bindings("pid_2"); return len(x), err },
		"candidates":  func() (int, error) { x, err := s.Candidates("pid_2"); return len(x), err },
		"approvals":   func() (int, error) { x, err := s.Approvals("pid_2"); return len(x), err },
		"checkpoints": func() (int, error) { x, err := s.Checkpoints("pid_2"); return len(x), err },
		"events":      func() (int, error) { x, err := s.Events("pid_2", 0, 0); return len(x), err },
		"unsettled":   func() (int, error) { x, err := s.Unsettled("pid_2"); return len(x), err },
		"kv":          func() (int, error) { x, _, err := s.KVList("pid_2", "", "", 0); return len(x), err },
	} {
		if k, err := n(); err != nil || k != 0 {
			t.Errorf("%s of another pid: %d, %v", name, k, err)
		}
	}
	// A PID that is a prefix of another sees none of its records.
	if err := s.KVPut(ctx, "pid_10", "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if es, _, _ := s.KVList("pid_1", "", "", 0); len(es) != 1 || es[0].Key != "user/a" {
		t.Fatalf("pid_1 sees %+v", es)
	}
}

// "registrations/bindings ... any name collision in the process": a bound name is
// a conflict, in the same process only.
func TestBindingConflict(t *testing.T) {
	s, _ := openMem(t)
	writeAllRecords(t, s)
	err := s.Update(ctx, func(tx *Tx) error {
		return tx.AddBinding(Binding{PID: "pid_1", Name: "t", ToolID: "tool_2"})
	})
	wantCode(t, err, CodeConflict)
	if b, _ := s.Binding("pid_1", "t"); b.ToolID != "tool_1" {
		t.Fatalf("binding replaced: %+v", b)
	}
	if err := s.Update(ctx, func(tx *Tx) error {
		return tx.AddBinding(Binding{PID: "pid_2", Name: "t", ToolID: "tool_3"})
	}); err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(tx *Tx) error { return tx.PutToolResult(ToolResult{PID: "pid_1", CallID: "call_1"}) })
	wantCode(t, err, CodeConflict)
	err = s.Update(ctx, func(tx *Tx) error { return tx.AddCheckpoint(Checkpoint{PID: "pid_1", ID: "ckpt_1"}) })
	wantCode(t, err, CodeConflict)
}

// "A logical operation that touches several records (e.g. register = binding +
// candidate state + event) is one atomic batch": an error anywhere in fn writes
// nothing.
func TestUpdateAtomic(t *testing.T) {
	s, _ := openMem(t)
	writeAllRecords(t, s)
	before := dump(t, s)
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx *Tx) error {
		c, err := tx.Candidate("pid_1", "tcand_1")
		if err != nil {
			return err
		}
		c.State = "registered"
		if err := tx.PutCandidate(c); err != nil {
			return err
		}
		if err := tx.AddBinding(Binding{PID: "pid_1", Name: "u", ToolID: "tool_9"}); err != nil {
			return err
		}
		if _, err := tx.Append("pid_1", "jit_registered", nil); err != nil {
			return err
		}
		if got, err := tx.Binding("pid_1", "u"); err != nil || got.ToolID != "tool_9" {
			t.Errorf("tx does not read its own write: %+v %v", got, err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if after := dump(t, s); !reflect.DeepEqual(before, after) {
		t.Fatal("a failed Update changed the store")
	}
	// A Tx kept past its Update is dead.
	var kept *Tx
	s.Update(ctx, func(tx *Tx) error { kept = tx; return nil })
	_, err = kept.Append("pid_1", "x", nil)
	wantCode(t, err, CodeClosed)
	_, err = kept.Process("pid_1")
	wantCode(t, err, CodeClosed)
	// A canceled context submits nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Append(cctx, "pid_1", "x", nil)
	wantCode(t, err, CodeCanceled)
	if after := dump(t, s); !reflect.DeepEqual(before, after) {
		t.Fatal("a canceled Update changed the store")
	}
}

func dump(t testing.TB, s *Store) map[string]string {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	m := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	return m
}

// Budgets: the check-and-increment is atomic and an exceeded limit changes nothing.
func TestChargeBudget(t *testing.T) {
	s, _ := openMem(t)
	for i := 1; i <= 3; i++ {
		b, err := s.Charge(ctx, "p", "calls", 1, 3)
		if err != nil || b.Used != int64(i) {
			t.Fatalf("charge %d: %+v, %v", i, b, err)
		}
	}
	_, err := s.Charge(ctx, "p", "calls", 1, 3)
	wantCode(t, err, CodeLimitExceeded)
	if b, _ := s.Budget("p", "calls"); b.Used != 3 {
		t.Fatalf("exceeded charge changed the counter: %d", b.Used)
	}
	if b, err := s.Charge(ctx, "p", "calls", 100, -1); err != nil || b.Used != 103 {
		t.Fatalf("unlimited charge: %+v, %v", b, err)
	}
	_, err = s.Charge(ctx, "p", "calls", -1, -1)
	wantCode(t, err, CodeInvalid)
	if b, err := s.Budget("p", "never"); err != nil || b.Used != 0 {
		t.Fatalf("uncharged counter: %+v, %v", b, err)
	}
}

// kv space: get/put/delete/list with prefix, limit and cursor.
func TestKVPagination(t *testing.T) {
	s, _ := openMem(t)
	var keys []string
	for i := 0; i < 25; i++ {
		k := fmt.Sprintf("a/%02d", i)
		keys = append(keys, k)
		if err := s.KVPut(ctx, "p", k, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "a0", "b/1"} {
		if err := s.KVPut(ctx, "p", k, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, s.KVPut(ctx, "p", "a/\xff", nil), CodeInvalid)
	var got []string
	cursor := ""
	pages := 0
	for {
		es, next, err := s.KVList("p", "a/", cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range es {
			got = append(got, e.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if pages != 3 || !reflect.DeepEqual(got, keys) {
		t.Fatalf("pages %d, keys %v", pages, got)
	}
	es, next, err := s.KVList("p", "a/", "", 25)
	if err != nil || len(es) != 25 || next != "" {
		t.Fatalf("exact page: %d entries, next %q, %v", len(es), next, err)
	}
	_, _, err = s.KVList("p", "a/", "b", 10)
	wantCode(t, err, CodeInvalid)
	existed, err := s.KVDelete(ctx, "p", "a/03")
	if err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
	existed, err = s.KVDelete(ctx, "p", "a/03")
	if err != nil || existed {
		t.Fatalf("second delete: %v %v", existed, err)
	}
	_, err = s.KVGet("p", "a/03")
	wantCode(t, err, CodeNotFound)
	if v, err := s.KVGet("p", "a"); err != nil || len(v) != 0 {
		t.Fatalf("empty value: %q %v", v, err)
	}
	wantCode(t, s.KVPut(ctx, "p", "", nil), CodeInvalid)
	wantCode(t, s.KVPut(ctx, "p", strings.Repeat("k", maxKVKeyLen+1), nil), CodeInvalid)
	wantCode(t, s.KVPut(ctx, "bad\x00pid", "k", nil), CodeInvalid)
}

// Events: list/paginate by process and sequence.
func TestEventsPagination(t *testing.T) {
	s, _ := openMem(t)
	for i := 0; i < 23; i++ {
		mustAppend(t, s, "p", "note", fmt.Sprintf(`{"i":%d}`, i))
	}
	var seqs []uint64
	after := uint64(0)
	for {
		es, err := s.Events("p", after, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		if len(es) > 5 {
			t.Fatalf("page of %d", len(es))
		}
		for _, e := range es {
			seqs = append(seqs, e.Seq)
		}
		after = es[len(es)-1].Seq
	}
	for i, q := range seqs {
		if q != uint64(i+1) {
			t.Fatalf("seqs %v", seqs)
		}
	}
	if len(seqs) != 23 {
		t.Fatalf("got %d events", len(seqs))
	}
	if es, _ := s.Events("p", 23, 5); len(es) != 0 {
		t.Fatalf("after the end: %d", len(es))
	}
	if es, _ := s.Events("p", ^uint64(0), 5); len(es) != 0 {
		t.Fatalf("after max: %d", len(es))
	}
	e, err := s.Event("p", 7)
	if err != nil || string(e.Data) != `{"i":6}` {
		t.Fatalf("event 7: %+v %v", e, err)
	}
	_, err = s.Event("p", 24)
	wantCode(t, err, CodeNotFound)
}

// "find tool_called events without settlement (used on rehydrate)".
func TestUnsettled(t *testing.T) {
	s, _ := openMem(t)
	mustAppend(t, s, "p", EventToolCalled, `{"call_id":"a"}`)
	mustAppend(t, s, "p", EventToolCalled, `{"call_id":"b"}`)
	mustAppend(t, s, "p", EventToolCalled, `{"call_id":"c"}`)
	mustAppend(t, s, "p", EventToolCalled, `{"call_id":"d"}`)
	mustAppend(t, s, "q", EventToolCalled, `{"call_id":"a"}`)
	mustAppend(t, s, "p", EventToolResult, `{"call_id":"b"}`)
	mustAppend(t, s, "p", EventToolFailed, `{"call_id":"d","error":{"code":"x"}}`)
	un, err := s.Unsettled("p")
	if err != nil || len(un) != 2 || un[0].CallID != "a" || un[1].CallID != "c" || un[0].Seq != 1 || un[1].Seq != 3 {
		t.Fatalf("unsettled %+v, %v", un, err)
	}
	mustAppend(t, s, "p", EventUnknownSettlement, `{"call_id":"a"}`)
	un, _ = s.Unsettled("p")
	if len(un) != 1 || un[0].CallID != "c" {
		t.Fatalf("unknown_settlement must settle: %+v", un)
	}
	// A call_id that is open cannot be opened again; once settled it can.
	_, err = s.Append(ctx, "p", EventToolCalled, json.RawMessage(`{"call_id":"c"}`))
	wantCode(t, err, CodeConflict)
	mustAppend(t, s, "p", EventToolCalled, `{"call_id":"b"}`)
	// A settlement of a call that is not open is recorded and changes nothing else.
	mustAppend(t, s, "p", EventToolFailed, `{"call_id":"never-opened"}`)
	if un, _ := s.Unsettled("p"); len(un) != 2 || un[0].CallID != "c" || un[1].CallID != "b" {
		t.Fatalf("unsettled after stray settlement: %+v", un)
	}
	if un, _ := s.Unsettled("q"); len(un) != 1 {
		t.Fatalf("q: %+v", un)
	}
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}

// "The embedded default location ... overridable by flag/env".
func TestDefaultDir(t *testing.T) {
	t.Setenv("LIBOS_DATA", "/x/data")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if d, _ := DefaultDir(); d != "/x/data" {
		t.Fatalf("LIBOS_DATA: %s", d)
	}
	t.Setenv("LIBOS_DATA", "")
	if d, _ := DefaultDir(); d != "/xdg/libos" {
		t.Fatalf("XDG_DATA_HOME: %s", d)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultDir(); d != "/home/u/.local/share/libos" {
		t.Fatalf("home: %s", d)
	}
}

// "created on first use; a second process opening the same directory gets a clear
// 'in use' error"; "an unknown newer format refuses to open with a clear error; an
// empty dir is initialised".
func TestOpenDirAndFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "p", "note", `{}`)
	_, err = Open(dir, Options{})
	wantCode(t, err, CodeInUse)
	if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("unclear: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err = s.Events("p", 0, 0)
	wantCode(t, err, CodeClosed)
	_, err = s.Append(ctx, "p", "note", nil)
	wantCode(t, err, CodeClosed)

	// A lock that cannot be taken at all is an io error, not in_use.
	bad := t.TempDir()
	if err := os.Mkdir(filepath.Join(bad, "LOCK"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = Open(bad, Options{})
	wantCode(t, err, CodeIO)

	setFormat := func(v string) {
		db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}, FormatMajorVersion: pebbleFormat})
		if err != nil {
			t.Fatal(err)
		}
		if v == "" {
			err = db.Delete([]byte("meta\x00format"), pebble.Sync)
		} else {
			err = db.Set([]byte("meta\x00format"), []byte(v), pebble.Sync)
		}
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	for _, tc := range []struct{ name, v string }{
		{"an unknown newer format refuses to open", "2"},
		{"an unreadable format refuses to open", "one"},
		{"data without a format version refuses to open", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setFormat(tc.v)
			_, err := Open(dir, Options{})
			wantCode(t, err, CodeFormatUnsupported)
			if !errors.Is(err, ErrFormatUnsupported) {
				t.Fatal(err)
			}
		})
	}
	setFormat("1")
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after refusal: %v", err)
	}
	defer s.Close()
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteBinding: an operator's revocation removes the binding (the name is free
// again) and a name that is not bound is not_found; a fork's binding keeps the PID
// that owns its candidate.
func TestDeleteBinding(t *testing.T) {
	s, _ := openMem(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx *Tx) error {
		return tx.AddBinding(Binding{PID: "pid_2", Name: "t", ToolID: "tool_1", CandidateID: "tcand_1", CandidatePID: "pid_1", Scope: "ephemeral_process"})
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Binding("pid_2", "t"); err != nil || b.CandidatePID != "pid_1" {
		t.Fatalf("binding = %+v, %v", b, err)
	}
	var got Binding
	if err := s.Update(ctx, func(tx *Tx) error {
		var err error
		got, err = tx.DeleteBinding("pid_2", "t")
		return err
	}); err != nil || got.ToolID != "tool_1" {
		t.Fatalf("DeleteBinding = %+v, %v", got, err)
	}
	if _, err := s.Binding("pid_2", "t"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v, want not_found", err)
	}
	err := s.Update(ctx, func(tx *Tx) error { _, err := tx.DeleteBinding("pid_2", "t"); return err })
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want not_found", err)
	}
}
