package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
)

// The stdio transport frames messages as MCP's stdio transport says: one JSON-RPC
// message per line, no embedded newline. A line is the unit of failure: a line that
// is not one exact message (not JSON, NaN, a NUL, a byte-order mark, a batch, too deep,
// over the size limit, bytes after the message) is answered with a JSON-RPC error —
// with the line's id when it can be read, null otherwise — recorded as
// protocol_rejected, and the session reads the next line. The SDK's own stdio
// transport decodes a stream instead, and ends the whole session at the first such
// line. A request whose id is that of a request still in flight is refused the same
// way (invalid request), never run: the SDK would drop it unanswered; so is a request
// out of the session's order (a second initialize, a request before initialize).
//
// The end of the input and a stop (Stdio's context) end the session only once every
// tools/call passed to the SDK has been answered (and every other request, for up to
// otherGrace after the last call: a request the SDK never answers cannot hold the
// session open): the answers of calls that ran are
// written before the session closes, never dropped with it.

// DefaultMaxLineBytes bounds one line of the stdio transport, as the SDK's does.
const DefaultMaxLineBytes = mcp.DefaultMaxLineLength

// Stdio serves the process on in and out until in ends or ctx is done, then waits
// for the answers of the requests in flight and returns. A stop does not stop the
// calls in flight: the caller stops the kernel (engine.Kernel.Close) to settle them
// and end the approvals they wait for. out is never closed.
func (s *Server) Stdio(ctx context.Context, in io.Reader, out io.Writer) error {
	c := s.newStdioConn(in, out, DefaultMaxLineBytes)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			c.drain()
		case <-runCtx.Done():
		}
	}()
	err := s.srv.Run(runCtx, connTransport{c})
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Transport is the stdio transport for the SDK's Server.Run, for callers that run the
// session themselves; Stdio is the one that also stops on a context.
func (s *Server) Transport(in io.Reader, out io.Writer) mcp.Transport {
	return connTransport{s.newStdioConn(in, out, DefaultMaxLineBytes)}
}

type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// stdioConn is the mcp.Connection of the stdio transport.
type stdioConn struct {
	s     *Server
	in    io.Reader
	out   io.Writer
	limit int

	wmu sync.Mutex // one message per Write on out
	hs  handshake

	msgs     chan jsonrpc.Message
	ended    chan struct{} // the reader stopped: end of input, a read error or a stop
	stop     chan struct{} // drain asked for
	stopOnce sync.Once
	closed   chan struct{}
	closeMu  sync.Once
	readErr  error // set before ended closes

	mu      sync.Mutex
	pending map[string]bool // ids of requests passed to the SDK and not yet answered: true for a tools/call
	ids     map[string]bool // ids of every request passed to the SDK and not yet answered
	idle    chan struct{}   // closed and replaced as pending empties
}

func (s *Server) newStdioConn(in io.Reader, out io.Writer, limit int) *stdioConn {
	c := &stdioConn{
		s: s, in: in, out: out, limit: limit,
		msgs: make(chan jsonrpc.Message), ended: make(chan struct{}), stop: make(chan struct{}),
		closed: make(chan struct{}), pending: map[string]bool{}, ids: map[string]bool{}, idle: make(chan struct{}),
	}
	close(c.idle) // nothing pending yet
	go c.read()
	return c
}

// drain stops taking input: the session ends once the requests in flight are answered.
func (c *stdioConn) drain() { c.stopOnce.Do(func() { close(c.stop) }) }

func (c *stdioConn) read() {
	defer close(c.ended)
	br := bufio.NewReaderSize(c.in, 64<<10)
	for {
		select {
		case <-c.stop:
			c.refuseBuffered(br)
			return
		default:
		}
		line, over, err := readLine(br, c.limit)
		if len(bytes.TrimSpace(line)) > 0 || over {
			c.handle(line, over)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.mu.Lock()
				c.readErr = err
				c.mu.Unlock()
			}
			return
		}
	}
}

// handle checks one line and passes it to the SDK or answers its refusal.
func (c *stdioConn) handle(line []byte, over bool) {
	ctx := context.Background()
	var m *message
	var r *rejection
	if over {
		r = reject(nil, jsonrpc.CodeInvalidRequest, "a line is over the %d-byte message limit", c.limit)
	} else {
		m, r = checkMessage(line)
	}
	if r == nil && m.method != "" && m.id != "" && c.inFlight(m.id) {
		// The SDK drops such a request without an answer (its id names the other).
		id, _ := json.Marshal(m.msg.(*jsonrpc.Request).ID.Raw())
		r = reject(id, jsonrpc.CodeInvalidRequest, "request id %s is in flight: an id is used again only once its request is answered", id)
	}
	if r == nil {
		r = c.hs.check(m)
	}
	if r != nil {
		c.write(append(c.s.refuse(ctx, line, r), '\n'))
		return
	}
	if resp := c.s.extensionResponse(m); resp != nil {
		if out, err := encodeAnswer(resp); err == nil {
			c.write(append(out, '\n'))
		}
		return
	}
	if m.method == "notifications/cancelled" {
		// A cancelled request may go unanswered (MCP's cancellation): stop waiting.
		var p struct {
			RequestID any `json:"requestId"`
		}
		if req, ok := m.msg.(*jsonrpc.Request); ok && json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				c.answered(keyOf(id))
			}
		}
	}
	if m.method != "" && m.id != "" {
		c.mu.Lock()
		c.ids[m.id] = true
		if m.method != "subscriptions/listen" {
			// subscriptions/listen parks until it is cancelled: nothing waits for it.
			if len(c.pending) == 0 {
				c.idle = make(chan struct{})
			}
			c.pending[m.id] = m.method == "tools/call"
		}
		c.mu.Unlock()
	}
	select {
	case c.msgs <- m.msg:
	case <-c.closed:
	case <-c.stop:
		// Stopping: the request is answered, not dropped.
		if m.id != "" && m.method != "" {
			c.release(m.id)
			c.answered(m.id)
			c.stopping(m)
		}
	}
}

// refuseBuffered answers the requests of the whole lines already read when a stop
// came: the server is stopping, but none of them goes unanswered.
func (c *stdioConn) refuseBuffered(br *bufio.Reader) {
	for {
		buffered, _ := br.Peek(br.Buffered())
		if bytes.IndexByte(buffered, '\n') < 0 {
			return
		}
		line, over, _ := readLine(br, c.limit)
		if over || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if m, r := checkMessage(line); r == nil && m.method != "" && m.id != "" {
			c.stopping(m)
		}
	}
}

// stopping answers a request that arrived as the server stops.
func (c *stdioConn) stopping(m *message) {
	id, _ := json.Marshal(m.msg.(*jsonrpc.Request).ID.Raw())
	te := ToolError{Code: string(engine.CodeClosed), Message: "mcp: the server is stopping"}
	c.write(append(errorResponse(id, jsonrpc.CodeInternalError, te), '\n'))
}

// readLine reads one line without its newline (and a \r before it). A line longer
// than limit is read to its end and discarded: over is true and line is its start.
func readLine(br *bufio.Reader, limit int) (line []byte, over bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > limit+2 { // the limit, plus \r\n
				over = true
				line = append(line, chunk[:min(len(chunk), max(0, limit-len(line)))]...)
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !over {
			line = bytes.TrimSuffix(line, []byte("\n"))
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) > limit {
				over = true
			}
		}
		return line, over, err
	}
}

func (c *stdioConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(b)
	return err
}

// inFlight reports whether a request with id was passed to the SDK and is not
// answered yet.
func (c *stdioConn) inFlight(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// release frees id for another request, as its answer is about to be written: the
// client may send the next request with it as soon as it reads the answer.
func (c *stdioConn) release(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
}

func (c *stdioConn) answered(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		if len(c.pending) == 0 {
			close(c.idle)
		}
	}
}

// Read returns the next checked message. After the input ends it waits until every
// request passed on is answered, then reports the end.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case <-c.ended:
	case <-c.stop:
		// The reader may be blocked on input that never comes: stop waiting for it.
	case <-c.closed:
		return nil, mcp.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var grace <-chan time.Time
	for {
		c.mu.Lock()
		idle, calls := c.idle, 0
		for _, isCall := range c.pending {
			if isCall {
				calls++
			}
		}
		rerr := c.readErr
		c.mu.Unlock()
		if calls == 0 && grace == nil {
			grace = time.After(otherGrace)
		}
		over := false
		select {
		case <-idle:
		case <-grace:
			over = true
		case <-c.closed:
			return nil, mcp.ErrConnectionClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		done := len(c.pending) == 0
		c.mu.Unlock()
		if !done && !over {
			continue
		}
		if rerr != nil {
			return nil, fmt.Errorf("mcp: stdin: %w", rerr)
		}
		return nil, io.EOF
	}
}

// otherGrace bounds how long the end of a session waits for the answers of requests
// other than tools/call once no call is in flight. The SDK answers them at once.
const otherGrace = 5 * time.Second

// Write writes one message as one line; an answer takes its request off the
// pending set. An answer that cannot be written as it is goes out as a JSON-RPC
// error for its request (wireerr.go): an error returned here would end the session.
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := encodeAnswer(msg)
	if err != nil {
		return err
	}
	r, isAnswer := msg.(*jsonrpc.Response)
	if isAnswer {
		c.hs.answered(msg)
		c.release(keyOf(r.ID))
	}
	err = c.write(append(data, '\n'))
	if isAnswer {
		c.answered(keyOf(r.ID))
	}
	return err
}

// Close ends the connection; out stays open.
func (c *stdioConn) Close() error {
	c.closeMu.Do(func() { close(c.closed) })
	return nil
}

func (c *stdioConn) SessionID() string { return "" }
