package tools

import (
	"testing"

	"github.com/agentlibos/libos/engine"
)

// "No recovery of codes from text": afterReturn reads the tool_failed event's stage
// and code, never its reason. An event written before the stage was recorded has
// none; its limit_exceeded is read as after return (the documented default), so such
// a call is refused for export rather than exported as a test that cannot pass.
func TestAfterReturnReadsTheStage(t *testing.T) {
	for _, c := range []struct {
		code, stage string
		want        bool
	}{
		{"limit_exceeded", engine.FailedInHandler, false},
		{"limit_exceeded", engine.FailedAtResult, true},
		{"limit_exceeded", "", true}, // an event from before the stage field
		{"capability_denied", engine.FailedInHandler, false},
		{"capability_denied", "", false},
		{"output_invalid", engine.FailedAtResult, true},
		{"output_invalid", "", true},
		{"tool_failed", engine.FailedInHandler, true},
		{"storage", engine.FailedAtResult, true},
		{"js_error", engine.FailedInHandler, false},
	} {
		if got := afterReturn(c.code, c.stage); got != c.want {
			t.Errorf("afterReturn(%q, %q) = %v, want %v", c.code, c.stage, got, c.want)
		}
	}
}
