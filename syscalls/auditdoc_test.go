package syscalls

import (
	"encoding/json"
	"testing"
)

// "Nothing the kernel built from a parsed value is parsed again": the syscall audit
// event reaches the store as a jsonexact.Doc (store.Tx.AppendDoc). It must say
// exactly what its JSON tags say, member for member and in order, or a reader of the
// audit log (and the hash chain over it) would see another record than the type
// describes; every field is set here, then each optional one left out.
func TestAuditEventDocIsItsJSON(t *testing.T) {
	in := decodeArgs(json.RawMessage(`{"key":"k","value":[1,2.50,{"n":9007199254740993}]}`))
	full := auditEvent{
		Route: "kv.put", Tool: "t", CallID: "call_1", Journal: &auditJournal{Index: 2, SHA256: "ab", Truncated: true},
		Depth: 1, Decision: "denied", Stage: "provider", Code: "provider_failed", Reason: "r", Cause: "c",
		Capability: "kv:write", Approval: &auditApproval{Class: "operator", Approved: true, By: "op", Reason: "ok"},
		ResultSHA256: "cd", Net: &auditNet{Method: "GET", Host: "h:443", Path: "/p", Address: "127.0.0.1:443", Status: 200,
			RequestBytes: 3, ResponseBytes: 4, Redirects: 1, Secrets: "S",
			Hops: []auditHop{{Method: "GET", Host: "g:80", Path: "/", Address: "127.0.0.1:80", Status: 302, Secrets: "S"}, {Method: "GET", Host: "h:443", Path: "/p"}}},
		Labels: []string{"a", "b"}, DurationMicros: 7,
	}
	full.noteArgs(in.sent, in)
	bare := auditEvent{Route: "clock.now", Decision: "allowed", Stage: "done",
		Journal: &auditJournal{SHA256: "ab"}, Approval: &auditApproval{Class: "none"}, Net: &auditNet{}}
	bare.noteArgs(nil, decodeArgs(nil))
	notExact := auditEvent{Route: "kv.put", Decision: "denied", Stage: "args"}
	notExact.noteArgs(json.RawMessage(`{"a":1,"a":2}`), decodeArgs(json.RawMessage(`{"a":1,"a":2}`)))
	for _, ev := range []auditEvent{full, bare, notExact} {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ev.doc()
		if err != nil {
			t.Fatal(err)
		}
		if d.Text() != string(want) {
			t.Errorf("doc %s\nwant %s", d.Text(), want)
		}
	}
}
