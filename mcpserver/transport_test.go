package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParamsKeysAnyTransport: the same rule as over stdio and HTTP ("a tools/call with
// params keys other than name, arguments and _meta is a protocol-frame failure,
// recorded") holds on any transport of the SDK that the server is run on through Wrap;
// here the SDK's in-memory transport, written to at the JSON-RPC level.
func TestParamsKeysAnyTransport(t *testing.T) {
	s, _, st, pid := bridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serverT, clientT := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- s.MCP().Run(ctx, s.Wrap(serverT)) }()
	conn, err := clientT.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := func(id int, method, params string) rpcResponse {
		t.Helper()
		rid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if resp, ok := msg.(*jsonrpc.Response); ok {
				out, _ := jsonrpc.EncodeMessage(resp)
				var r rpcResponse
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				return r
			}
		}
	}
	call(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	answers := map[string]rpcResponse{}
	for i, c := range paramsCases {
		r := call(10+i, "tools/call", c.params)
		answers[string(r.ID)] = r
	}
	conn.Close()
	<-done
	checkRefusals(t, st, pid, answers, 0)
}
