package engine

import (
	"github.com/agentlibos/libos/liberr"
	"strconv"
	"strings"
	"testing"
)

func nest(depth int) string {
	// depth nested objects: {"a":{"a":...{}...}}
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// TestAdapterDepth checks generated frames for DESIGN.md rule 4, "nesting depth is
// bounded", in every way arguments can arrive.
func TestAdapterDepth(t *testing.T) {
	lim := adapterLimits{maxDepth: 8, maxFrameBytes: 1 << 20}
	cases := []struct {
		name  string
		frame string
		ok    bool
	}{
		{"string-at-bound", `{"name":"echo","arguments":` + strconv.Quote(nest(8)) + `}`, true},
		{"string-over-bound", `{"name":"echo","arguments":` + strconv.Quote(nest(9)) + `}`, false},
		{"input-at-bound", `{"name":"echo","input":` + nest(8) + `}`, true},
		{"input-over-bound", `{"name":"echo","input":` + nest(9) + `}`, false},
		{"mcp-request-at-bound", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + nest(8) + `}}`, true},
		{"mcp-request-over-bound", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + nest(9) + `}}`, false},
		{"arrays-over-bound", `{"name":"echo","input":{"a":` + strings.Repeat("[", 8) + strings.Repeat("]", 8) + `}}`, false},
		{"depth-bomb-string", `{"name":"echo","arguments":"` + strings.Repeat("[", 200000) + `"}`, false},
		{"depth-bomb-frame", `{"name":"echo","input":` + strings.Repeat(`{"a":`, 200000) + `}`, false},
		{"meta-depth-bounded-too", `{"name":"echo","input":{},"_meta":` + nest(12) + `}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := normalizeFrame([]byte(c.frame), lim)
			checkNormalized(t, n, err)
			if c.ok && err != nil {
				t.Fatalf("rejected at the bound: %v", err)
			}
			if !c.ok && liberr.CodeOf(err) != CodeProtocolFrame {
				t.Fatalf("over the bound: got %v, want a protocol_frame failure", err)
			}
		})
	}
}

// TestAdapterFrameLimit: the frame itself is bounded so a huge frame is refused before
// it is parsed; the refusal is a limit, not a malformed frame.
func TestAdapterFrameLimit(t *testing.T) {
	lim := adapterLimits{maxDepth: 8, maxFrameBytes: 64}
	frame := `{"name":"echo","arguments":{"pad":"` + strings.Repeat("x", 64) + `"}}`
	_, err := normalizeFrame([]byte(frame), lim)
	if liberr.CodeOf(err) != CodeLimitExceeded {
		t.Fatalf("got %v, want limit_exceeded", err)
	}
}
