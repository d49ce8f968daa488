package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSIGTERMWithACallInFlight: "Graceful shutdown on SIGINT/SIGTERM loses nothing
// acknowledged" and, in serve's help, "calls in flight finish and are recorded before
// the store closes". A JIT tool is still running when SIGTERM arrives: afterwards its
// tool_called event has a settlement, the chain verifies, and reopening the store
// reports no unknown settlement.
func TestSIGTERMWithACallInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	url, cmd, stderr := startHTTP(t, "--data", data)
	c := newClient(t, ctx, &mcp.StreamableClientTransport{Endpoint: url})
	pid := spawnedPID(t, stderr)

	// A tool that computes for a while (tests: [] so that validation only compiles it;
	// the sandbox has no ambient clock to wait on).
	cand := map[string]any{
		"name":          "slow",
		"description":   "Run for about half a second, then answer.",
		"source_code":   "export function run(args: {}) { let x = 0; for (let i = 0; i < 1e6; i++) x = (x + i) % 7; return { done: x >= 0 }; }",
		"input_schema":  map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		"output_schema": map[string]any{"type": "object", "properties": map[string]any{"done": map[string]any{"type": "boolean"}}, "required": []string{"done"}, "additionalProperties": false},
		"tests":         []any{},
	}
	raw, _ := json.Marshal(cand)
	res, err := c.call(ctx, "propose_jit_tool", string(raw))
	if err != nil || res.IsError {
		t.Fatalf("propose: %v %+v", err, res)
	}
	var p struct {
		CandidateID string `json:"candidate_id"`
	}
	_ = json.Unmarshal([]byte(textOf(t, res)), &p)
	if res, err = c.call(ctx, "register_jit_tool", `{"candidate_id":"`+p.CandidateID+`"}`); err != nil || res.IsError {
		t.Fatalf("register: %v %+v", err, res)
	}

	answered := make(chan error, 1)
	go func() {
		r, err := c.call(ctx, "slow", `{}`)
		if err == nil && r.IsError {
			err = &callError{textOf(t, r)}
		}
		answered <- err
	}()
	time.Sleep(150 * time.Millisecond) // the call is in the sandbox now
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
	select {
	case err := <-answered:
		t.Logf("the client's answer: %v", err)
	case <-time.After(5 * time.Second):
		t.Log("the client got no answer")
	}
	_ = c.cs.Close()

	r := libos(t, "", "events", pid, "--verify", "--json", "--data", data)
	if r.code != 0 {
		t.Fatalf("events --verify: %d %s", r.code, r.stderr)
	}
	open := map[string]bool{}
	slowCalled := false
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events --json line %q: %v", line, err)
		}
		var d struct {
			CallID string `json:"call_id"`
			Tool   string `json:"tool"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		switch ev.Type {
		case "tool_called":
			open[d.CallID] = true
			slowCalled = slowCalled || d.Tool == "slow"
		case "tool_result", "tool_failed":
			delete(open, d.CallID)
		case "unknown_settlement":
			t.Errorf("an unknown settlement after a graceful shutdown: %s", ev.Data)
		}
	}
	if !slowCalled {
		t.Fatalf("the slow call never started; the test proves nothing:\n%s", r.stdout)
	}
	if len(open) != 0 {
		t.Fatalf("calls in flight at SIGTERM were not settled before the store closed: %v\n%s", open, r.stdout)
	}
}

type callError struct{ s string }

func (e *callError) Error() string { return e.s }
