package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/tools"
)

// "A malformed or oversized process ID given to export or replay is call_not_found,
// with the ID clipped in the message": an ID the store could never hold names no
// process, and the refusal is a short message, never a storage error echoing it.
func TestExportReplayRefuseBadProcessIDs(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pid := w.spawn(t, engine.Direct)
	call, err := w.callID(t, pid, tools.EchoName, `{"x":1}`)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("p", 64<<10)
	for _, bad := range []string{huge, "pid\x00" + huge, "", "pid\x01x", string([]byte{0xff, 0xfe})} {
		check := func(what string, err error) {
			t.Helper()
			if !codeIs(err, tools.CodeCallNotFound) {
				t.Fatalf("%s of process %q: %.300v, want call_not_found", what, liberr.Clip(bad, 40), err)
			}
			if n := len(err.Error()); n > 300 {
				t.Fatalf("%s of a %d-byte process ID: the error is %d bytes", what, len(bad), n)
			}
		}
		_, err := tools.ExportTape(w.st, bad, call)
		check("export", err)
		_, err = tools.Replay(ctx, w.st, sandbox(t), bad, call, tools.ReplayOptions{})
		check("replay", err)
		_, err = tools.ReplayAll(ctx, w.st, sandbox(t), bad, tools.ReplayOptions{})
		check("replay --all", err)
		_, err = tools.CallTool(w.st, bad, call)
		check("call tool", err)
	}
	// An oversized call ID of a real process is clipped the same way.
	_, err = tools.ExportTape(w.st, pid, huge)
	if !codeIs(err, tools.CodeCallNotFound) || len(err.Error()) > 300 {
		t.Fatalf("export of a %d-byte call ID: %.300v", len(huge), err)
	}
}

// "An export of a call whose test no validation would accept (over the tape size or
// depth bound) is refused with limit_exceeded": the kernel takes arguments larger and
// deeper than a test may hold, and such a call is never exported as a test that
// could not pass. A call within the bounds exports a test that validates.
func TestExportRefusesATestNoValidationAccepts(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cand := versioned(t, "1")
	pid := w.registerCandidate(t, cand)
	deep := strings.Repeat(`{"a":`, tools.DefaultMaxDepth+2) + "1" + strings.Repeat("}", tools.DefaultMaxDepth+2)
	for _, tc := range []struct{ rule, args string }{
		{"a test over the size bound", `{"pad":"` + strings.Repeat("x", tools.DefaultMaxTestBytes) + `"}`},
		{"a test over the depth bound", deep},
	} {
		call, err := w.callID(t, pid, "versioned", tc.args)
		if err != nil {
			t.Fatalf("%s: the call: %v", tc.rule, err)
		}
		if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeLimitExceeded) {
			t.Fatalf("%s: export: %v, want limit_exceeded", tc.rule, err)
		}
	}
	call, err := w.callID(t, pid, "versioned", `{"pad":"x"}`)
	if err != nil {
		t.Fatal(err)
	}
	test, err := tools.ExportTape(w.st, pid, call)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tools.ParseCandidate([]byte(withField(t, cand, "tests", "["+mustJSON(test)+"]")))
	if err != nil {
		t.Fatal(err)
	}
	if rep := w.jit.Validator().Validate(ctx, c); !rep.OK {
		t.Fatalf("a call within the bounds exports a test that validates: %s", mustJSON(rep))
	}
}
