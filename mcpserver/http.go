package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxBodyBytes bounds the body of one HTTP POST, as DefaultMaxLineBytes bounds
// a stdio line.
const DefaultMaxBodyBytes = DefaultMaxLineBytes

// Handler is the streamable HTTP handler of the server. It serves both revisions of
// MCP in use on one endpoint: clients of 2025-11-25 (and earlier) open a session with
// initialize and keep it (Mcp-Session-Id, a GET event stream for notifications);
// clients of 2026-07-28 send stateless requests that carry the revision in
// params._meta and the Mcp-Protocol-Version header, discover the server with
// server/discover and follow changes on subscriptions/listen. The SDK serves the
// stateless revision only from a stateless handler, so each request goes to the
// handler of its revision: the one its _meta names, else the one its
// Mcp-Protocol-Version header names (server/discover and headers of 2026-07-28 and
// later go to the stateless one).
//
// Every POST body is checked (see gate.go) before the SDK reads it: a body that is not
// one exact message is answered with a JSON-RPC error whose data holds the typed code
// (HTTP 200 when the request's id could be read, 400 when not), and is recorded as
// protocol_rejected; a body over DefaultMaxBodyBytes the same way with HTTP 413. The
// POSTs in flight are counted (subscriptions/listen streams aside), so that Wait can
// let their answers out before the server stops.
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	o.Stateless = false
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &o)
	o.Stateless = true
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &o)
	byHeader := func(r *http.Request) http.Handler {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessRevision {
			return stateless
		}
		return stateful
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			byHeader(r).ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxBodyBytes+1))
		if err != nil {
			http.Error(w, "mcp: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		status := http.StatusBadRequest
		var rej *rejection
		var m *message
		if len(body) > DefaultMaxBodyBytes {
			status = http.StatusRequestEntityTooLarge
			rej = reject(nil, jsonrpc.CodeInvalidRequest, "the body is over the %d-byte message limit", DefaultMaxBodyBytes)
			body = body[:DefaultMaxBodyBytes]
		} else {
			m, rej = checkMessage(body)
		}
		if rej != nil {
			out := s.refuse(r.Context(), body, rej)
			if rej.id != nil && status == http.StatusBadRequest {
				// A refused request whose id is known is answered like any request
				// the server fails: a JSON-RPC error in a 200 response, which clients
				// match to their request rather than take for a transport failure.
				status = http.StatusOK
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(out)
			return
		}
		if resp := s.extensionResponse(m); resp != nil {
			// A method of an extension the SDK does not know (skills/list, skills/get).
			if h := r.Header.Get("Mcp-Method"); h != "" && h != m.method {
				http.Error(w, "mcp: the Mcp-Method header does not match the body's method", http.StatusBadRequest)
				return
			}
			out, _ := jsonrpc.EncodeMessage(resp)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		}
		if m.method != "subscriptions/listen" {
			s.posts.Add(1)
			defer s.posts.Done()
		}
		if h := r.Header.Get("Mcp-Name"); h != "" && m.method == "tools/call" {
			// An HTTP field value has no leading or trailing white space (RFC 9110,
			// 5.5), so a name sent with some can only arrive trimmed in Mcp-Name. That
			// is still a match; the SDK compares exactly, so it is given the name as
			// the body holds it.
			var p struct {
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &p) == nil && p.Params.Name != h && strings.Trim(p.Params.Name, " \t") == h {
				r.Header.Set("Mcp-Name", p.Params.Name)
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		switch {
		case m.version != "" || m.method == "server/discover":
			stateless.ServeHTTP(w, r)
		default:
			byHeader(r).ServeHTTP(w, r)
		}
	})
	if s.auth != nil {
		// Authorization comes first: a refused request is not read (auth.go).
		return s.guard(h)
	}
	return h
}

// statelessRevision is the first revision of MCP without the initialize handshake.
const statelessRevision = "2026-07-28"

// Wait returns when every POST in flight has been answered, or when ctx is done.
// Call it after the kernel stopped taking calls (engine.Kernel.Close) and before
// closing the HTTP server, whose event streams never end by themselves.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.posts.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
