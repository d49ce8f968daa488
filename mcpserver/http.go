package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxBodyBytes bounds the body of one HTTP POST, as DefaultMaxLineBytes bounds
// a stdio line.
const DefaultMaxBodyBytes = DefaultMaxLineBytes

// Handler is the streamable HTTP handler of the server. Every POST body is checked
// (see gate.go) before the SDK reads it: a body that is not one exact message is
// answered with HTTP 400 and a JSON-RPC error whose data holds the typed code, and is
// recorded as protocol_rejected; a body over DefaultMaxBodyBytes the same way with
// HTTP 413. The POSTs in flight are counted, so that Wait can let their answers out
// before the server stops.
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		s.posts.Add(1)
		defer s.posts.Done()
		body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxBodyBytes+1))
		if err != nil {
			http.Error(w, "mcp: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		status := http.StatusBadRequest
		var rej *rejection
		if len(body) > DefaultMaxBodyBytes {
			status = http.StatusRequestEntityTooLarge
			rej = reject(nil, jsonrpc.CodeInvalidRequest, "the body is over the %d-byte message limit", DefaultMaxBodyBytes)
			body = body[:DefaultMaxBodyBytes]
		} else {
			_, rej = checkMessage(body)
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
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

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
