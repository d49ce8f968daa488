package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wrap puts the exact check of every message (gate.go) in front of any transport of
// the MCP Go SDK (an in-memory transport, a command transport, one of the embedder's
// own), as Stdio does for stdio and Handler for streamable HTTP. Messages arrive
// decoded from such a transport, so what its decoder already took apart (a duplicated
// envelope member) is out of reach; their params are still the raw bytes that were
// sent, and are checked as on the other transports: a refused message is answered
// with a protocol_frame error, recorded as protocol_rejected and never dispatched.
func (s *Server) Wrap(t mcp.Transport) mcp.Transport {
	return &wrapped{t: t, s: s}
}

type wrapped struct {
	t mcp.Transport
	s *Server
}

func (w *wrapped) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := w.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &wrappedConn{Connection: c, s: w.s}, nil
}

type wrappedConn struct {
	mcp.Connection
	s  *Server
	hs handshake
}

func (c *wrappedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		raw, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			// Params that are not JSON: the SDK refuses them itself.
			return msg, nil
		}
		m, rej := checkMessage(raw)
		if rej == nil {
			rej = c.hs.check(m)
		}
		if rej == nil {
			if resp := c.s.extensionResponse(m); resp != nil {
				if err := c.Connection.Write(ctx, resp); err != nil {
					return nil, err
				}
				continue
			}
			return msg, nil
		}
		answer := c.s.refuse(ctx, raw, rej)
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.ID.IsValid() {
			continue // a notification or a response: nobody waits for an answer
		}
		var r struct {
			Error *jsonrpc.Error `json:"error"`
		}
		if json.Unmarshal(answer, &r) != nil || r.Error == nil {
			continue
		}
		if err := c.Connection.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: r.Error}); err != nil {
			return nil, err
		}
	}
}

// Write makes an answer writable (wireerr.go) before the transport encodes it.
func (c *wrappedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.hs.answered(msg)
	return c.Connection.Write(ctx, wireMessage(msg))
}
