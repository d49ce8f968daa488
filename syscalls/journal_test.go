package syscalls

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// journalOf reads the journal of call and checks every entry against its audit event:
// "the journal is written with the same durability as the audit event, and the hash
// chain covers it" — the event names the entry's index and the digest of its record.
func journalOf(t *testing.T, st *store.Store, pid, call string) []store.JournalEntry {
	t.Helper()
	js, err := st.Journal(pid, call)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type != EventSyscall || e.CallID != call {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Journal == nil || ev.Journal.Index != n || n >= len(js) || ev.Journal.SHA256 != js[n].Digest {
			t.Fatalf("syscall event %d of %s does not name journal entry %d by its digest: %s", e.Seq, call, n, e.Data)
		}
		n++
	}
	if n != len(js) {
		t.Fatalf("%d audit events for %d journal entries", n, len(js))
	}
	if err := st.Verify(pid); err != nil {
		t.Fatal(err)
	}
	return js
}

// "Every syscall a JIT tool makes in production records its result (or its typed
// error) durably beside its audit event": results exactly as the code received them,
// denials and provider failures with the code and message the code saw, in order.
func TestJournalRecordsResultsAndTypedErrors(t *testing.T) {
	r, st := newRouter(t, RouterConfig{})
	c := Caller{PID: "p", Tool: "t", CallID: "call_1", Capabilities: NewCapSet(CapClockNow, CapKVRead)}
	b := r.For(c)
	ctx := context.Background()
	now, err := b.Syscall(ctx, "clock.now", json.RawMessage(`{ "timezone" : "UTC" }`))
	if err != nil {
		t.Fatal(err)
	}
	_, denied := b.Syscall(ctx, "kv.put", json.RawMessage(`{"key":"k","value":1}`))
	_, unknown := b.Syscall(ctx, "no.such", json.RawMessage(`{}`))
	got, err := b.Syscall(ctx, "kv.get", json.RawMessage(`{"key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	// A caller without a call ID (a syscall outside any tool call) journals nothing.
	if _, err := r.For(Caller{PID: "p", Capabilities: NewCapSet(CapClockNow)}).Syscall(ctx, "clock.now", json.RawMessage(`{"timezone":"UTC"}`)); err != nil {
		t.Fatal(err)
	}

	js := journalOf(t, st, "p", "call_1")
	if len(js) != 4 {
		t.Fatalf("4 syscalls, %d entries", len(js))
	}
	want := []struct {
		route, args, result, code string
		message                   string
	}{
		{"clock.now", `{"timezone":"UTC"}`, string(now), "", ""},
		{"kv.put", `{"key":"k","value":1}`, "", CodeCapabilityDenied, denied.Error()},
		{"no.such", `{}`, "", string(CodeUnknownSyscall), unknown.Error()},
		{"kv.get", `{"key":"k"}`, string(got), "", ""},
	}
	for i, w := range want {
		e := js[i]
		if e.Index != i || e.Route != w.route || string(e.Args) != w.args || string(e.Result) != w.result || e.Truncated {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
		// The layer is a field of the entry, not a prefix of its text: the entry
		// renders what the code saw, and a replay needs to read no text to rebuild it.
		if (w.code == "") != (e.Error == nil) || (e.Error != nil && (e.Error.Code != w.code ||
			(&Error{Code: liberr.Code(e.Error.Code), Layer: e.Error.Layer, Message: e.Error.Message}).Error() != w.message ||
			strings.HasPrefix(e.Error.Message, Layer+":"))) {
			t.Errorf("entry %d error: %+v, want %s %q", i, e.Error, w.code, w.message)
		}
	}
}

// "bounded per call and per result (configurable in the image; beyond the bound the
// entry keeps the digest and is marked truncated)".
func TestJournalBounds(t *testing.T) {
	r, st := newRouter(t, RouterConfig{})
	caps := NewCapSet(CapKVRead, CapKVWrite)
	ctx := context.Background()
	big := `{"key":"big","value":"` + strings.Repeat("x", 300) + `"}`

	b := r.For(Caller{PID: "p", Tool: "t", CallID: "entry", Capabilities: caps, Journal: JournalLimits{MaxEntryBytes: 200}})
	if _, err := b.Syscall(ctx, "kv.put", json.RawMessage(big)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Syscall(ctx, "kv.get", json.RawMessage(`{"key":"small"}`)); err != nil {
		t.Fatal(err)
	}
	js := journalOf(t, st, "p", "entry")
	if !js[0].Truncated || js[0].Args != nil || js[0].Result != nil || js[0].ArgsBytes != len(big) || js[0].ArgsSHA256 != sha256hex([]byte(big)) || js[0].ResultSHA256 == "" {
		t.Errorf("an entry over the per-entry bound keeps sizes and digests only: %+v", js[0])
	}
	if js[1].Truncated || string(js[1].Args) != `{"key":"small"}` {
		t.Errorf("the next small entry is whole: %+v", js[1])
	}

	b = r.For(Caller{PID: "p", Tool: "t", CallID: "call", Capabilities: caps, Journal: JournalLimits{MaxCallBytes: 100}})
	for range 4 {
		if _, err := b.Syscall(ctx, "kv.get", json.RawMessage(`{"key":"some-key-of-a-few-bytes"}`)); err != nil {
			t.Fatal(err)
		}
	}
	js = journalOf(t, st, "p", "call")
	if js[0].Truncated || !js[3].Truncated || js[3].ArgsSHA256 == "" {
		t.Errorf("entries past the per-call bound are truncated, earlier ones whole: %+v", js)
	}
}
