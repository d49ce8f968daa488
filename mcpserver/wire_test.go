package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/mcpserver"
)

// wireMsg is one message the server wrote: a response, or a request of its own.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// dataCode is the typed code an error's data holds, "" when it holds none.
func (m wireMsg) dataCode() string {
	if m.Error == nil {
		return ""
	}
	var d struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(m.Error.Data, &d)
	return d.Code
}

// stdioClient drives a Server over the stdio transport, one line at a time.
type stdioClient struct {
	t    *testing.T
	in   *io.PipeWriter
	msgs chan wireMsg
	done chan struct{} // closed when the session ended, with err set
	err  error
}

// overStdio serves pid of sys over stdio until the test ends.
func overStdio(t *testing.T, sys *libos.System, pid string) *stdioClient {
	t.Helper()
	srv, err := sys.MCPServer(pid, mcpserver.Options{Name: "wire-test", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, msgs: make(chan wireMsg, 16), done: make(chan struct{})}
	go func() {
		c.err = srv.Stdio(context.Background(), inR, outW)
		outW.Close()
		close(c.done)
	}()
	go func() {
		defer close(c.msgs)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m wireMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the server wrote a line that is not JSON: %.200q", sc.Bytes())
				continue
			}
			if len(m.ID) > 0 {
				c.msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		for range c.msgs {
		}
		<-c.done
	})
	return c
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next is the next message with an id the server wrote; the session ending before
// it fails the test.
func (c *stdioClient) next() wireMsg {
	c.t.Helper()
	m, ok := <-c.msgs
	if !ok {
		<-c.done
		c.t.Fatalf("the session ended (Stdio returned %v) before answering", c.err)
	}
	return m
}

// call sends a request and returns the next message, which must answer it.
func (c *stdioClient) call(id, method, params string) wireMsg {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
	m := c.next()
	if string(m.ID) != id {
		c.t.Fatalf("%s %.200s: the next answer is to id %s: %+v", method, params, m.ID, m)
	}
	return m
}

const initParams = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire-test","version":"1"}}`

// initialize opens the session.
func (c *stdioClient) initialize() {
	c.t.Helper()
	if m := c.call(`"init"`, "initialize", initParams); m.Error != nil {
		c.t.Fatalf("initialize: %+v", m.Error)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// alive checks that the session still answers a request.
func (c *stdioClient) alive(after string) {
	c.t.Helper()
	if m := c.call(`"alive"`, "tools/list", `{}`); m.Error != nil || !strings.Contains(string(m.Result), `"tools"`) {
		c.t.Fatalf("after %s, tools/list: %s %+v", after, m.Result, m.Error)
	}
}

// answerOf is the answer in the body of an HTTP POST: the JSON body, or the message
// with an id among the events of an event stream.
func answerOf(t *testing.T, resp *http.Response, body string) wireMsg {
	t.Helper()
	var m wireMsg
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, e := range events(body) {
			var em wireMsg
			if json.Unmarshal([]byte(e["data"]), &em) == nil && len(em.ID) > 0 {
				return em
			}
		}
		t.Fatalf("HTTP %d: no answer among the events of %.300s", resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("HTTP %d: the body is not a JSON-RPC message: %.300q", resp.StatusCode, body)
	}
	return m
}

// httpAlive checks that session sid still answers a request.
func httpAlive(t *testing.T, url, sid, after string) {
	t.Helper()
	resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":"alive","method":"tools/list","params":{}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after %s, tools/list: HTTP %d %s", after, resp.StatusCode, body)
	}
	if m := answerOf(t, resp, body); m.Error != nil || !strings.Contains(string(m.Result), `"tools"`) {
		t.Fatalf("after %s, tools/list: %s %+v", after, m.Result, m.Error)
	}
}

// jsonrpcCodes are the error codes the server may answer with: JSON-RPC's and the
// SDK's for a resource that is not found (JSON-RPC's invalid params by default).
var jsonrpcCodes = map[int64]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32603: true}

// oddRequests are requests with odd params: control characters, NUL, a huge string,
// names nobody serves. Each is a method the server serves (or refuses by name).
func oddRequests(pid string) []struct{ rule, method, params string } {
	huge := strings.Repeat(`\u0001`, 1<<17)
	return []struct{ rule, method, params string }{
		{"a NUL as the URI", "resources/read", `{"uri":"\u0000"}`},
		{"control characters in the URI", "resources/read", `{"uri":"libos:\u0007\u007f\u001b[0m"}`},
		{"a page of the audit log with a NUL for seq", "resources/read", `{"uri":"libos://process/` + pid + `/events/after/\u0000"}`},
		{"a candidate named by a NUL", "resources/read", `{"uri":"libos://process/` + pid + `/candidates/\u0000\u0001"}`},
		{"a Skill named by control characters", "resources/read", `{"uri":"skill://\u0000\u0002/SKILL.md"}`},
		{"a huge URI", "resources/read", `{"uri":"` + huge + `"}`},
		{"a prompt named by a NUL", "prompts/get", `{"name":"\u0000"}`},
		{"a huge prompt name", "prompts/get", `{"name":"` + huge + `"}`},
		{"a completion of a NUL reference", "completion/complete", `{"ref":{"type":"ref/resource","uri":"\u0000"},"argument":{"name":"\u0000","value":"\u0001"}}`},
		{"a subscription to a NUL", "resources/subscribe", `{"uri":"\u0000"}`},
		{"a method named by control characters", "\u0000\u0007/x", `{}`},
		{"a tool named by a NUL", "tools/call", `{"name":"\u0000","arguments":{}}`},
	}
}

// TestOddParamsKeepTheSession: "every error leaving the server is JSON with a
// JSON-RPC code ... any method, any odd URI/param (NUL, invalid UTF-8, huge strings)
// must get a JSON-RPC error and leave the session alive". Each odd request is
// answered (with a result or an error whose code is JSON-RPC's, never 0), the line
// or body is JSON, and the session answers the next request, over stdio and over
// streamable HTTP.
func TestOddParamsKeepTheSession(t *testing.T) {
	sys, pid, url := served(t, engine.Direct)
	check := func(t *testing.T, rule string, m wireMsg) {
		t.Helper()
		if m.Error == nil && m.Result == nil {
			t.Errorf("%s: neither a result nor an error", rule)
		}
		if m.Error != nil && !jsonrpcCodes[m.Error.Code] {
			t.Errorf("%s: error code %d (%s), want a JSON-RPC code", rule, m.Error.Code, m.Error.Message)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		c := overStdio(t, sys, pid)
		c.initialize()
		for i, r := range oddRequests(pid) {
			method, _ := json.Marshal(r.method)
			c.send(`{"jsonrpc":"2.0","id":` + itoa(100+i) + `,"method":` + string(method) + `,"params":` + r.params + `}`)
			m := c.next()
			if string(m.ID) != itoa(100+i) {
				t.Fatalf("%s: the next answer is to id %s", r.rule, m.ID)
			}
			check(t, r.rule, m)
			c.alive(r.rule)
		}
	})
	t.Run("http", func(t *testing.T) {
		sid := session(t, url)
		for i, r := range oddRequests(pid) {
			if r.method == "\u0000\u0007/x" {
				// A method nobody serves is refused by the SDK's HTTP transport
				// before any session sees it (HTTP 400, a text body).
				continue
			}
			method, _ := json.Marshal(r.method)
			resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":`+itoa(100+i)+`,"method":`+string(method)+`,"params":`+r.params+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: HTTP %d %.300s", r.rule, resp.StatusCode, body)
			}
			check(t, r.rule, answerOf(t, resp, body))
			httpAlive(t, url, sid, r.rule)
		}
	})
}

// TestSetLevelTakesTheProtocolsLevels: "logging/setLevel must accept only the
// protocol's eight levels (debug, info, notice, warning, error, critical, alert,
// emergency); anything else (wrong case, unknown, non-string, missing) is -32602
// (Invalid params)". A refused level is a protocol_frame refusal like any other,
// and the session goes on, over stdio and over streamable HTTP.
func TestSetLevelTakesTheProtocolsLevels(t *testing.T) {
	sys, pid, url := served(t, engine.Direct)
	bad := []string{`{"level":"Debug"}`, `{"level":"INFO"}`, `{"level":"verbose"}`, `{"level":""}`, `{"level":" info"}`,
		`{"level":3}`, `{"level":null}`, `{"level":["info"]}`, `{}`, `{"_meta":{}}`}
	good := []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
	check := func(t *testing.T, params string, m wireMsg) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32602 || m.dataCode() != "protocol_frame" {
			t.Errorf("logging/setLevel %s: %s %+v, want invalid params (protocol_frame)", params, m.Result, m.Error)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		c := overStdio(t, sys, pid)
		c.initialize()
		for _, params := range bad {
			check(t, params, c.call(`"lv"`, "logging/setLevel", params))
			c.alive("logging/setLevel " + params)
		}
		c.send(`{"jsonrpc":"2.0","id":"np","method":"logging/setLevel"}`)
		check(t, "without params", c.next())
		for _, lv := range good {
			if m := c.call(`"lv"`, "logging/setLevel", `{"level":"`+lv+`"}`); m.Error != nil {
				t.Errorf("logging/setLevel %s: %+v", lv, m.Error)
			}
		}
		c.alive("logging/setLevel")
	})
	t.Run("http", func(t *testing.T) {
		sid := session(t, url)
		setLevel := func(params string) wireMsg {
			t.Helper()
			resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":`+params+`}`)
			return answerOf(t, resp, body)
		}
		for _, params := range bad {
			check(t, params, setLevel(params))
			httpAlive(t, url, sid, "logging/setLevel "+params)
		}
		for _, lv := range good {
			if m := setLevel(`{"level":"` + lv + `"}`); m.Error != nil {
				t.Errorf("logging/setLevel %s: %+v", lv, m.Error)
			}
		}
		httpAlive(t, url, sid, "logging/setLevel")
	})
}

// TestSessionOrder: "A second initialize, and a request before initialize ... must
// get -32600 (Invalid Request) on stdio and over HTTP", never code 0, and the session
// goes on: a ping before initialize is answered, the session then initializes, and
// after a second initialize it still answers.
func TestSessionOrder(t *testing.T) {
	sys, pid, url := served(t, engine.Direct)
	check := func(t *testing.T, what string, m wireMsg) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("%s: %s %+v, want invalid request (-32600)", what, m.Result, m.Error)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		c := overStdio(t, sys, pid)
		check(t, "tools/list before initialize", c.call("1", "tools/list", `{}`))
		check(t, "tools/call before initialize", c.call("2", "tools/call", `{"name":"echo","arguments":{}}`))
		if m := c.call("3", "ping", `{}`); m.Error != nil {
			t.Errorf("ping before initialize: %+v", m.Error)
		}
		c.initialize()
		c.alive("the requests before initialize")
		check(t, "a second initialize", c.call("4", "initialize", initParams))
		c.alive("a second initialize")
	})
	t.Run("http", func(t *testing.T) {
		resp, body := post(t, url, "", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
		check(t, "tools/list before initialize", answerOf(t, resp, body))
		sid := session(t, url)
		resp, body = post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"initialize","params":`+initParams+`}`)
		check(t, "a second initialize", answerOf(t, resp, body))
		httpAlive(t, url, sid, "a second initialize")
	})
	evs, err := sys.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == engine.EventProtocolRejected {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d protocol_rejected events, want one for each of the 5 refusals", n)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// guardedImage is testdata/images/approvals.yaml: echo waits for an operator's
// approval, which keeps a call in flight as long as the test needs.
func guardedImage(t *testing.T) *image.Image {
	t.Helper()
	img, err := image.LoadImage(os.DirFS("../testdata/images"), "approvals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestStdioInFlightIDRefused: "a request reusing the id of one still in flight ...
// must be refused with -32600, recorded as protocol_rejected (as other rejected
// frames are), and never run". A tools/call waits for an operator's approval; a
// second request with its id is refused at once, the first is answered when
// approved, and the id is free again once it is answered.
func TestStdioInFlightIDRefused(t *testing.T) {
	ctx := context.Background()
	sys, pid, _ := servedImage(t, guardedImage(t))
	c := overStdio(t, sys, pid)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"first":true}}}`)
	approval := pendingApproval(t, sys, pid)
	// The session ends only once the call is answered: a failing test denies it.
	t.Cleanup(func() { _ = sys.Deny(ctx, approval.ID, "the test ended") })
	for _, again := range []string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"second":true}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	} {
		c.send(again)
		c.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
		if m := c.next(); string(m.ID) != "5" || m.Error == nil || m.Error.Code != -32600 || m.dataCode() != "protocol_frame" {
			t.Fatalf("%s while id 5 is in flight: the next answer is %s %s %+v, want invalid request (protocol_frame) for id 5", again, m.ID, m.Result, m.Error)
		}
		if m := c.next(); string(m.ID) != `"after"` || m.Error != nil {
			t.Fatalf("the ping after: %s %+v", m.ID, m.Error)
		}
	}
	if err := sys.Approve(ctx, approval.ID); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); string(m.ID) != "5" || m.Error != nil || !strings.Contains(string(m.Result), `\"first\":true`) {
		t.Fatalf("the approved call: %s %s %+v", m.ID, m.Result, m.Error)
	}
	if m := c.call("5", "ping", `{}`); m.Error != nil {
		t.Fatalf("a ping with id 5 once its call is answered: %+v", m.Error)
	}
	c.alive("the refusals")
	counts := eventCounts(t, sys.Store(), pid)
	if counts[engine.EventProtocolRejected] != 2 || counts[engine.EventToolCalled] != 1 {
		t.Fatalf("events %v, want 2 protocol_rejected and 1 tool_called", counts)
	}
}

// TestHTTPInFlightIDRefused is TestStdioInFlightIDRefused over streamable HTTP: a
// request of a session that reuses the id of one still in flight there is refused with
// -32600 and recorded as protocol_rejected (the SDK refused it unrecorded), never run; the
// same id in another session is free, and the id is free again once answered.
func TestHTTPInFlightIDRefused(t *testing.T) {
	ctx := context.Background()
	sys, pid, url := servedImage(t, guardedImage(t))
	sid := session(t, url)
	first := make(chan wireMsg, 1)
	go func() {
		resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"first":true}}}`)
		first <- answerOf(t, resp, body)
	}()
	approval := pendingApproval(t, sys, pid)
	resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"second":true}}}`)
	if m := answerOf(t, resp, body); string(m.ID) != "5" || m.Error == nil || m.Error.Code != -32600 || m.dataCode() != "protocol_frame" {
		t.Fatalf("id 5 again while in flight: %s %s %+v, want invalid request (protocol_frame)", m.ID, m.Result, m.Error)
	}
	other := session(t, url)
	resp, body = post(t, url, other, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := answerOf(t, resp, body); m.Error != nil {
		t.Fatalf("id 5 in another session: %+v", m.Error)
	}
	if err := sys.Approve(ctx, approval.ID); err != nil {
		t.Fatal(err)
	}
	if m := <-first; string(m.ID) != "5" || m.Error != nil || !strings.Contains(string(m.Result), `\"first\":true`) {
		t.Fatalf("the approved call: %s %s %+v", m.ID, m.Result, m.Error)
	}
	resp, body = post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := answerOf(t, resp, body); m.Error != nil {
		t.Fatalf("a ping with id 5 once its call is answered: %+v", m.Error)
	}
	counts := eventCounts(t, sys.Store(), pid)
	if counts[engine.EventProtocolRejected] != 1 || counts[engine.EventToolCalled] != 1 {
		t.Fatalf("events %v, want 1 protocol_rejected and 1 tool_called", counts)
	}
}

// TestInitializeParamsOfTheWrongType: the params of initialize have the types MCP gives
// them, down to the members of clientInfo and capabilities; one of another type is
// invalid params (-32602) on every transport, never code 0 or an internal error, and the
// session can still initialize.
func TestInitializeParamsOfTheWrongType(t *testing.T) {
	sys, pid, url := served(t, engine.Direct)
	bad := []string{
		`{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"x","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":[],"clientInfo":{"name":"x","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":"yes"}},"clientInfo":{"name":"x","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":7,"version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":"x"}`,
	}
	check := func(t *testing.T, params string, m wireMsg) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32602 || m.dataCode() != "protocol_frame" {
			t.Errorf("initialize %s: %s %+v, want invalid params (protocol_frame)", params, m.Result, m.Error)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		c := overStdio(t, sys, pid)
		for i, params := range bad {
			check(t, params, c.call(itoa(i+1), "initialize", params))
		}
		c.initialize()
		c.alive("initialize with params of the wrong type")
	})
	t.Run("http", func(t *testing.T) {
		for i, params := range bad {
			resp, body := post(t, url, "", "2025-11-25", `{"jsonrpc":"2.0","id":`+itoa(i+1)+`,"method":"initialize","params":`+params+`}`)
			check(t, params, answerOf(t, resp, body))
		}
		httpAlive(t, url, session(t, url), "initialize with params of the wrong type")
	})
}

// pendingApproval waits for the one approval the process's call asks for.
func pendingApproval(t *testing.T, sys *libos.System, pid string) engine.Approval {
	t.Helper()
	for {
		as, err := sys.Approvals(pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 {
			return as[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// JSON-RPC 2.0: a request for a method the server does not have is answered with
// -32601 (method not found), and one that is not a request of its method (an id on a
// notification's method) with -32600, in a JSON-RPC error carrying its id, on every
// transport: over HTTP on the handshake revisions too, where the SDK would answer a
// plain-text HTTP 400. Over HTTP the refusal is recorded like every refused frame, and
// the session goes on.
func TestRequestsTheServerCannotTakeAreJSONRPCErrors(t *testing.T) {
	sys, pid, url := served(t, engine.Direct)
	cases := []struct {
		id, method, params string
		code               int64
	}{
		{"7", "no/such/method", `{}`, -32601},
		{`"x"`, "tools/cal", `{"name":"echo"}`, -32601},
		{"8", "notifications/initialized", `{}`, -32600},
	}
	t.Run("stdio", func(t *testing.T) {
		c := overStdio(t, sys, pid)
		c.initialize()
		for _, tc := range cases {
			if m := c.call(tc.id, tc.method, tc.params); m.Error == nil || m.Error.Code != tc.code {
				t.Errorf("%s: %s %+v, want code %d", tc.method, m.Result, m.Error, tc.code)
			}
		}
		c.alive("requests the server cannot take")
	})
	t.Run("http", func(t *testing.T) {
		before := eventCounts(t, sys.Store(), pid)[engine.EventProtocolRejected]
		sid := session(t, url)
		for _, tc := range cases {
			resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":`+tc.id+`,"method":"`+tc.method+`","params":`+tc.params+`}`)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s: HTTP %d %s: %s", tc.method, resp.StatusCode, ct, body)
				continue
			}
			if m := answerOf(t, resp, body); string(m.ID) != tc.id || m.Error == nil || m.Error.Code != tc.code {
				t.Errorf("%s: %s %s %+v, want code %d", tc.method, m.ID, m.Result, m.Error, tc.code)
			}
		}
		resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
		if m := answerOf(t, resp, body); m.Error != nil || !strings.Contains(string(m.Result), `"tools"`) {
			t.Fatalf("tools/list after the refusals: %s %+v", m.Result, m.Error)
		}
		if got := eventCounts(t, sys.Store(), pid)[engine.EventProtocolRejected] - before; got != len(cases) {
			t.Errorf("%d refusals recorded, want %d", got, len(cases))
		}
	})
}
