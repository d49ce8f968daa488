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

// BenchmarkToolsCallEcho measures one MCP tools/call of echo through the SDK (in
// memory, no transport cost) and the whole kernel pipeline, two synced store batches
// included.
func BenchmarkToolsCallEcho(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(k, pid, Options{Name: "bench", Version: "1"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, stt, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := json.RawMessage(`{"s":"probe","n":9007199254740993,"l":[1,2,3],"o":{"action":"x"}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkCheckMessage measures the exact check of one incoming message that every
// transport runs before the SDK decodes it: a well-formed tools/call.
func BenchmarkCheckMessage(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"s":"probe","n":9007199254740993,"l":[1,2,3],"o":{"action":"x"}},"_meta":{"progressToken":7}}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, r := checkMessage(msg); r != nil {
			b.Fatal(r.reason)
		}
	}
}
