package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/internal/randid"
	"github.com/agentlibos/libos/liberr"
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
// protocol_rejected; a body over DefaultMaxBodyBytes the same way with HTTP 413; and
// so is a request of the handshake revisions out of its session's order (a request
// other than initialize and ping outside a session, initialize in one). The
// POSTs in flight are counted (subscriptions/listen streams aside), so that Wait can
// let their answers out before the server stops.
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	o.Stateless = false
	if o.EventStore == nil {
		// With an event store the SDK primes each POST event stream of a session of
		// 2025-11-25 with an event ID and empty data, and replays a stream to a
		// client that reconnects with Last-Event-ID. The store is bounded (the SDK
		// drops the oldest events past 10 MiB) and forgets a session when it closes.
		o.EventStore = mcp.NewMemoryEventStore(nil)
	}
	stateful := primeRetry(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &o))
	o.Stateless = true
	// The stateless revision has no resumable streams (no Last-Event-ID), so
	// nothing of its streams is kept.
	o.EventStore = nil
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
			if rej == nil && m.version == "" && m.method != "server/discover" && r.Header.Get("Mcp-Protocol-Version") < statelessRevision {
				rej = s.sessionOrder(m, r.Header.Get("Mcp-Session-Id"))
			}
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
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && m.method != "" && m.id != "" && m.version == "" {
			// A request reusing the id of one still in flight in its session is refused
			// here, recorded like every refused frame; the SDK would refuse it unrecorded.
			release, ok := s.holdID(sid, m.id)
			if !ok {
				id, _ := json.Marshal(m.msg.(*jsonrpc.Request).ID.Raw())
				out := s.refuse(r.Context(), body, reject(id, jsonrpc.CodeInvalidRequest, "request id %s is in flight: an id is used again only once its request is answered", id))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(out)
				return
			}
			defer release()
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
		r.Header.Del(slotHeader) // only this handler sets it
		switch {
		case m.method == "tools/call" && m.version >= statelessRevision:
			// A stateless call has no session to carry its cancellation: it is found
			// by its id when notifications/cancelled arrives (outside any session),
			// and the call's handler by the slot this header names.
			// A client of that revision may also cancel by closing the request's
			// stream (the TypeScript SDK's client does so over HTTP): the request's
			// context ends, and the call is stopped as by notifications/cancelled.
			tok, forget := s.track(m.id)
			defer forget()
			r.Header.Set(slotHeader, tok)
			defer context.AfterFunc(r.Context(), func() { s.stopSlot(tok) })()
		case m.method == "notifications/cancelled" && r.Header.Get("Mcp-Session-Id") == "":
			s.cancelCall(m)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		switch {
		case m.version != "" || m.method == "server/discover":
			stateless.ServeHTTP(w, r)
		case m.id != "" && r.Header.Get("Mcp-Protocol-Version") < statelessRevision:
			// The SDK refuses a request of the handshake revisions that it cannot
			// take (a method it does not have, an id on a notification's method)
			// with a plain-text HTTP 400. A JSON-RPC request is answered in JSON-RPC:
			// that refusal becomes a JSON-RPC error, recorded like every refused frame.
			pw := &plainRefusal{ResponseWriter: w}
			byHeader(r).ServeHTTP(pw, r)
			if pw.held {
				id, _ := json.Marshal(m.msg.(*jsonrpc.Request).ID.Raw())
				text := strings.TrimSpace(pw.text.String())
				code := int64(jsonrpc.CodeInvalidRequest)
				if strings.HasPrefix(text, sdkNotHandled) {
					code = jsonrpc.CodeMethodNotFound
				}
				out := s.refuse(r.Context(), body, reject(id, code, "%s", liberr.Clip(text, 200)))
				w.Header().Del("X-Content-Type-Options")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(out)
			}
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

// sessionOrder refuses a request of the handshake revisions that comes out of the
// order of session sid ("" for a request outside any session), whose state the SDK
// holds (see outOfOrder). A session the SDK does not know is left to it (HTTP 404).
func (s *Server) sessionOrder(m *message, sid string) *rejection {
	initialized := false
	if sid != "" {
		ss := s.session(sid)
		if ss == nil {
			return nil
		}
		initialized = ss.InitializeParams() != nil
	}
	return outOfOrder(m, initialized)
}

// session is the SDK's session sid, nil when there is none.
func (s *Server) session(sid string) *mcp.ServerSession {
	for ss := range s.srv.Sessions() {
		if ss.ID() == sid {
			return ss
		}
	}
	return nil
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

// slotHeader carries, from Handler to the call's handler, the slot of a stateless
// call in flight. A client's own value is removed.
const slotHeader = "Libos-Call-Slot"

// callSlot is a stateless call in flight: its handler puts its cancel there.
type callSlot struct {
	mu        sync.Mutex
	cancel    context.CancelFunc
	cancelled bool
}

func (c *callSlot) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
}

// bind makes ctx the call's context, cancelled by a stop (at once if one came).
func (c *callSlot) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.cancel = cancel
	if c.cancelled {
		cancel()
	}
	c.mu.Unlock()
	return ctx, cancel
}

// track records a stateless call in flight under its id and returns its slot's
// token; forget removes it.
// holdID marks request id as in flight in session sid until release is called, or
// reports false when it already is.
func (s *Server) holdID(sid, id string) (release func(), ok bool) {
	k := sid + "\x00" + id
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if _, held := s.sessionIDs[k]; held {
		return nil, false
	}
	if s.sessionIDs == nil {
		s.sessionIDs = map[string]struct{}{}
	}
	s.sessionIDs[k] = struct{}{}
	return func() {
		s.callMu.Lock()
		defer s.callMu.Unlock()
		delete(s.sessionIDs, k)
	}, true
}

func (s *Server) track(id string) (tok string, forget func()) {
	tok = randid.New("")
	slot := &callSlot{}
	s.callMu.Lock()
	if s.inflight == nil {
		s.inflight = map[string][]*callSlot{}
		s.slots = map[string]*callSlot{}
	}
	s.inflight[id] = append(s.inflight[id], slot)
	s.slots[tok] = slot
	s.callMu.Unlock()
	return tok, func() {
		s.callMu.Lock()
		defer s.callMu.Unlock()
		delete(s.slots, tok)
		list := s.inflight[id]
		for i, x := range list {
			if x == slot {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.inflight, id)
		} else {
			s.inflight[id] = list
		}
	}
}

// callContext binds a stateless call's context to its slot, when Handler made one.
func (s *Server) callContext(ctx context.Context, req *mcp.CallToolRequest) (context.Context, context.CancelFunc) {
	if req.Extra == nil || req.Extra.Header == nil {
		return ctx, func() {}
	}
	s.callMu.Lock()
	slot := s.slots[req.Extra.Header.Get(slotHeader)]
	s.callMu.Unlock()
	if slot == nil {
		return ctx, func() {}
	}
	return slot.bind(ctx)
}

// stopSlot stops the stateless call in flight whose slot is tok, if any.
func (s *Server) stopSlot(tok string) {
	s.callMu.Lock()
	slot := s.slots[tok]
	s.callMu.Unlock()
	if slot != nil {
		slot.stop()
	}
}

// cancelCall stops the stateless calls in flight with the requestId that
// notifications/cancelled m names: their guests stop, and each is settled as canceled.
func (s *Server) cancelCall(m *message) {
	req, ok := m.msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	s.callMu.Lock()
	list := append([]*callSlot(nil), s.inflight[keyOf(id)]...)
	s.callMu.Unlock()
	for _, c := range list {
		c.stop()
	}
}

// ReconnectDelay is the reconnection delay a client of a session is given, in the
// SSE retry field of the priming event that opens each POST event stream. A
// connection cut before its stream ends (the server stopping, a proxy's timeout)
// is then retried after this delay, with the last event ID, rather than after a
// delay the client guesses.
const ReconnectDelay = time.Second

// primeEvent is how the SDK starts the priming event of an event stream.
var primeEvent = []byte("event: prime\n")

// primeRetry adds the SSE retry field (ReconnectDelay) to the priming event of
// every event stream h writes. The field may come on any event; on the first one
// the client knows the delay before anything can cut the connection.
func primeRetry(h http.Handler) http.Handler {
	retry := []byte("retry: " + strconv.FormatInt(ReconnectDelay.Milliseconds(), 10) + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&retryWriter{ResponseWriter: w, retry: retry}, r)
	})
}

// retryWriter inserts retry in front of the first write when that write is a
// priming event; every later write passes unchanged.
type retryWriter struct {
	http.ResponseWriter
	retry []byte
	wrote atomic.Bool // writes of one stream may come from several goroutines
}

func (w *retryWriter) Write(b []byte) (int, error) {
	if w.wrote.Swap(true) || !bytes.HasPrefix(b, primeEvent) {
		return w.ResponseWriter.Write(b)
	}
	if _, err := w.ResponseWriter.Write(w.retry); err != nil {
		return 0, err
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer, so the
// SDK's flush after each event still reaches the client.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sdkNotHandled starts the SDK's refusal of a method it does not have.
const sdkNotHandled = "JSON RPC not handled"

// plainRefusal passes a response through, except a plain-text HTTP 400, which it holds
// back (with its text) for the handler to answer in JSON-RPC instead.
type plainRefusal struct {
	http.ResponseWriter
	held, passed bool
	text         bytes.Buffer
}

func (p *plainRefusal) WriteHeader(code int) {
	if !p.passed && !p.held && code == http.StatusBadRequest && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.held = true
		return
	}
	p.passed = true
	p.ResponseWriter.WriteHeader(code)
}

func (p *plainRefusal) Write(b []byte) (int, error) {
	if p.held {
		if p.text.Len() < 4096 {
			p.text.Write(b[:min(len(b), 4096-p.text.Len())])
		}
		return len(b), nil
	}
	p.passed = true
	return p.ResponseWriter.Write(b)
}

// Flush passes a stream's events on as they are written.
func (p *plainRefusal) Flush() {
	if p.held {
		return
	}
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's own writer.
func (p *plainRefusal) Unwrap() http.ResponseWriter { return p.ResponseWriter }
