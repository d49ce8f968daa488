package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// engine.Call.Defer: "the pipeline runs fn once the call's settlement is applied, just
// before it asks for the sync the answer waits for; on a path that settles otherwise (a
// failed handler, a refused result) it runs fn before dispatch returns." Work a handler
// leaves on its Call (a sandbox instance's restore) runs exactly once for every call
// that reached its handler, whatever the settlement, and has run when the call is
// answered; the settlement is what the log holds.
func TestDeferredWorkRunsOnceOnEveryPath(t *testing.T) {
	var (
		ran    int
		result json.RawMessage
		fail   error
	)
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{builtin("leaves", `{"type":"object"}`, `{"type":"object","required":["n"]}`,
		func(_ context.Context, call *engine.Call) (json.RawMessage, error) {
			call.Defer(func() { ran++ })
			return result, fail
		})}})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"leaves"}})
	for _, tc := range []struct {
		name    string
		result  string
		fail    error
		code    string
		settled string
	}{
		{"a result, settled with tool_result", `{"n":1}`, nil, "", engine.EventToolResult},
		{"a handler error, settled with tool_failed", ``, errors.New("no"), "tool_failed", engine.EventToolFailed},
		{"a result the output schema refuses", `{"m":1}`, nil, "output_invalid", engine.EventToolFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, fail = 0, tc.fail
			result = nil
			if tc.result != "" {
				result = json.RawMessage(tc.result)
			}
			_, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"leaves","arguments":{}}`))
			if codeOf(err) != tc.code {
				t.Fatalf("call: %v, want code %q", err, tc.code)
			}
			if ran != 1 {
				t.Fatalf("the deferred work ran %d times by the time the call was answered, want once", ran)
			}
			evs := e.events(t, pid)
			if last := evs[len(evs)-1]; last.Type != tc.settled {
				t.Fatalf("the call was settled with %s, want %s", last.Type, tc.settled)
			}
		})
	}
}

// A Call made outside the pipeline (a handler called directly, as a test or an
// embedder might) has no settlement to wait for: Defer runs the work at once.
func TestDeferOutsideThePipelineRunsAtOnce(t *testing.T) {
	ran := false
	(&engine.Call{Tool: "x"}).Defer(func() { ran = true })
	if !ran {
		t.Fatal("Defer on a Call outside the pipeline did not run the work")
	}
}
