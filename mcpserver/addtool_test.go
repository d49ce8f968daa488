package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAddToolInvalidParamHeader: "the host survives every guest failure" — a tool
// whose x-mcp-header annotations the SDK refuses (a candidate stored before
// propose_jit_tool checked them) never stops the server: it is listed without the
// annotations, its numbers exact, and the other tools are listed as before.
func TestAddToolInvalidParamHeader(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	s.addTool(&mcp.Tool{Name: "bad", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"R\u00e9gion","maxLength":9007199254740993},"o":{"type":"object","properties":{"w":{"type":"string","x-mcp-header":"W"}}}}}`)})
	s.addTool(&mcp.Tool{Name: "good", InputSchema: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"V"}}}`)})

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tool := range tl.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		got[tool.Name] = string(b)
	}
	if bad := got["bad"]; bad == "" || strings.Contains(bad, "x-mcp-header") || !strings.Contains(bad, `"maxLength"`) {
		t.Errorf("the tool with an invalid annotation is listed as %q", bad)
	}
	if !strings.Contains(got["good"], `"x-mcp-header":"V"`) {
		t.Errorf("a valid annotation is listed as %q", got["good"])
	}
	// The client decodes numbers as it likes; what the server sends keeps them.
	if out := string(stripParamHeaders(json.RawMessage(`{"properties":{"v":{"maxLength":9007199254740993,"x-mcp-header":"x y"}}}`))); out != `{"properties":{"v":{"maxLength":9007199254740993}}}` {
		t.Errorf("stripped schema = %s", out)
	}
}
