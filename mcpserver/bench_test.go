package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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

// BenchmarkStdioFilter measures the params check in front of the SDK on the stdio
// transport: one well-formed tools/call message read, checked and passed on.
func BenchmarkStdioFilter(b *testing.B) {
	s := &Server{rawKey: newRawKey()}
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"s":"probe","n":9007199254740993,"l":[1,2,3],"o":{"action":"x"}},"_meta":{"progressToken":7}}}` + "\n")
	in := bytes.Repeat(msg, b.N)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	n, err := io.Copy(io.Discard, s.filter(bytes.NewReader(in), mcp.DefaultMaxLineLength))
	if err != nil || n != int64(len(in)) {
		b.Fatal(n, err)
	}
}
