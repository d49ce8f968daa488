package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// tools/list carries the engine's MCP rendering, not the stored schemas: MCP requires an
// outputSchema whose root is an object (a tool returning a scalar has none in the list)
// and object schemas for root properties (a boolean schema is written as its object
// equivalent). A list that breaks either rule is refused by MCP clients whole.
func TestToolsListUsesTheMCPRendering(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	scalar := engine.Tool{
		Name: "count_words", Description: "Count words.", Kind: engine.KindJIT, ID: "tool_test",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":true},"required":["text"]}`),
		OutputSchema: json.RawMessage(`{"type":"integer"}`),
		Handler:      func(context.Context, *engine.Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil },
	}
	if err := k.InstallTool(ctx, pid, scalar, nil); err != nil {
		t.Fatal(err)
	}
	s, err := New(k, pid, Options{Name: "test", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, tool := range list.Tools {
		if tool.Name != "count_words" {
			continue
		}
		found = true
		if tool.OutputSchema != nil {
			out, _ := json.Marshal(tool.OutputSchema)
			t.Errorf("a scalar outputSchema reached tools/list: %s", out)
		}
		in, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(in, &schema); err != nil {
			t.Fatal(err)
		}
		if p := schema.Properties["text"]; len(p) == 0 || p[0] != '{' {
			t.Errorf("root property text is %s, want an object schema: %s", p, in)
		}
	}
	if !found {
		t.Fatalf("count_words is not listed: %+v", list.Tools)
	}
}
