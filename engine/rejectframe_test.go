package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
)

// TestRejectFrame: a message the transport refuses before the adapter is "a
// protocol-frame failure (recorded as such in the audit log, never as a tool
// failure)": the error is protocol_frame, the log has one protocol_rejected event
// saying it came from the transport, and nothing was called.
func TestRejectFrame(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	frame := []byte(`{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`)
	err := e.k.RejectFrame(context.Background(), pid, frame, `mcp: member "Method" is not "method"`)
	if !errors.Is(err, engine.ErrProtocolFrame) || liberr.CodeOf(err) != engine.CodeProtocolFrame {
		t.Fatalf("RejectFrame = %v, want a protocol_frame error", err)
	}
	var rejected []json.RawMessage
	for _, ev := range e.events(t, pid) {
		switch ev.Type {
		case engine.EventProtocolRejected:
			rejected = append(rejected, ev.Data)
		case engine.EventToolCalled, engine.EventCallRejected:
			t.Errorf("a refused frame left %s", ev.Type)
		}
	}
	if len(rejected) != 1 {
		t.Fatalf("%d protocol_rejected events, want 1", len(rejected))
	}
	var d struct {
		Code, Reason, Via string
		FrameBytes        int `json:"frame_bytes"`
	}
	if err := json.Unmarshal(rejected[0], &d); err != nil || d.Code != "protocol_frame" || d.Via != "transport" || d.FrameBytes != len(frame) {
		t.Errorf("protocol_rejected data %s: %v", rejected[0], err)
	}
	// A process that does not exist: still a protocol_frame error to the client.
	if err := e.k.RejectFrame(context.Background(), "pid_none", frame, "x"); !errors.Is(err, engine.ErrProtocolFrame) {
		t.Errorf("unknown process: %v", err)
	}
}
