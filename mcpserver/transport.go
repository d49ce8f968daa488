package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wrap puts the tools/call params check in front of any transport of the MCP Go SDK
// (an in-memory transport, a command transport, one of the embedder's own), as
// Transport does for stdio and Handler for streamable HTTP: a tools/call whose params
// are not a plain {name, arguments, _meta} object reaches the kernel whole, and is
// refused as protocol_frame, instead of losing keys in the SDK's decoding. Messages
// arrive decoded from such a transport, but their params are still the raw bytes that
// were sent.
func (s *Server) Wrap(t mcp.Transport) mcp.Transport {
	return &wrapped{t: t, rawKey: s.rawKey}
}

type wrapped struct {
	t      mcp.Transport
	rawKey string
}

func (w *wrapped) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := w.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &wrappedConn{Connection: c, rawKey: w.rawKey}, nil
}

type wrappedConn struct {
	mcp.Connection
	rawKey string
}

func (c *wrappedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || req.Method != "tools/call" {
		return msg, err
	}
	env, err := json.Marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{req.Method, req.Params})
	if err != nil {
		// Params that are not JSON: the SDK refuses them itself.
		return msg, nil
	}
	out, changed := rewriteRequest(env, c.rawKey)
	if !changed {
		return msg, nil
	}
	var nr struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(out, &nr) != nil {
		return msg, nil
	}
	cp := *req
	cp.Params = nr.Params
	return &cp, nil
}
