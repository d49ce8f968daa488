package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// bridge is a kernel with one echo process served by a Server.
func bridge(t testing.TB) (*Server, *engine.Kernel, *store.Store, string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(k, pid, Options{Name: "test", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, k, st, pid
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// paramsCases are tools/call params and whether the call must be refused as a
// protocol-frame failure.
var paramsCases = []struct {
	rule, params string
	refused      bool
}{
	{"name and arguments are a call", `{"name":"echo","arguments":{"k":1}}`, false},
	{"_meta is allowed", `{"name":"echo","arguments":{"k":1},"_meta":{"progressToken":"p"}}`, false},
	{"an unknown params key is refused", `{"name":"echo","arguments":{},"bogus":1}`, true},
	{"a params key differing in case is refused", `{"name":"echo","Arguments":{"k":1}}`, true},
	{"a duplicated name is refused", `{"name":"echo","name":"echo","arguments":{}}`, true},
	{"requestState is not an MCP tools/call params key", `{"name":"echo","arguments":{},"requestState":"s"}`, true},
}

// checkRefusals checks the answers to paramsCases (by id, 10+i) and the audit log:
// a refused call is a JSON-RPC invalid-params error with code protocol_frame and a
// protocol_rejected event, and nothing was dispatched.
func checkRefusals(t *testing.T, st *store.Store, pid string, answers map[string]rpcResponse, more int) {
	t.Helper()
	refused := more
	for i, c := range paramsCases {
		r, ok := answers[itoa(10+i)]
		if !ok {
			t.Errorf("%s: no answer", c.rule)
			continue
		}
		if !c.refused {
			if r.Error != nil || !strings.Contains(string(r.Result), `{\"k\":1}`) {
				t.Errorf("%s: %s %+v", c.rule, r.Result, r.Error)
			}
			continue
		}
		refused++
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(string(r.Error.Data), `"code":"protocol_frame"`) {
			t.Errorf("%s: want a JSON-RPC invalid-params error with code protocol_frame, got %s %+v", c.rule, r.Result, r.Error)
		}
	}
	evs, err := st.Events(pid, 0, store.MaxPage)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, ev := range evs {
		counts[ev.Type]++
	}
	if called := len(paramsCases) + more - refused; counts[engine.EventProtocolRejected] != refused || counts[engine.EventToolCalled] != called {
		t.Errorf("events %v, want %d protocol_rejected and %d tool_called", counts, refused, called)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestParamsKeysStdio: over the stdio transport, a tools/call with params keys other
// than name, arguments and _meta is a protocol-frame failure, recorded.
func TestParamsKeysStdio(t *testing.T) {
	s, _, st, pid := bridge(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Stdio(ctx, inR, outW) }()

	answers := map[string]rpcResponse{}
	got := make(chan rpcResponse)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r rpcResponse
			if json.Unmarshal(sc.Bytes(), &r) == nil && len(r.ID) > 0 {
				got <- r
			}
		}
	}()
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	<-got
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, c := range paramsCases {
		send(`{"jsonrpc":"2.0","id":` + itoa(10+i) + `,"method":"tools/call","params":` + c.params + `}`)
		r := <-got
		answers[string(r.ID)] = r
	}
	// MCP's stdio transport: "messages are delimited by newlines, and MUST NOT contain
	// embedded newlines". A message spread over lines is refused line by line, each
	// line with an error of id null, and the session goes on.
	send("{\n \"jsonrpc\": \"2.0\",\n \"id\": 99,\n \"method\": \"ping\"\n}")
	for range 5 {
		if r := <-got; r.Error == nil || string(r.ID) != "null" || !strings.Contains(string(r.Error.Data), `"code":"protocol_frame"`) {
			t.Errorf("a line of a multi-line message: %s %+v", r.ID, r.Error)
		}
	}
	send(`{"jsonrpc":"2.0","id":100,"method":"ping"}`)
	if r := <-got; string(r.ID) != "100" || r.Error != nil {
		t.Errorf("the session did not go on: %s %+v", r.ID, r.Error)
	}
	inW.Close()
	<-done
	checkRefusals(t, st, pid, answers, 5) // and the five lines of the multi-line message
}

// TestParamsKeysHTTP: the same over streamable HTTP.
func TestParamsKeysHTTP(t *testing.T) {
	s, _, st, pid := bridge(t)
	srv := httptest.NewServer(s.Handler(&mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer srv.Close()
	session := ""
	post := func(msg string) rpcResponse {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		b, _ := io.ReadAll(resp.Body)
		var r rpcResponse
		if d, ok := bytes.CutPrefix(bytes.TrimSpace(b), []byte("event: message\ndata: ")); ok {
			b = d
		}
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
		}
		return r
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	answers := map[string]rpcResponse{}
	for i, c := range paramsCases {
		r := post(`{"jsonrpc":"2.0","id":` + itoa(10+i) + `,"method":"tools/call","params":` + c.params + `}`)
		answers[string(r.ID)] = r
	}
	checkRefusals(t, st, pid, answers, 0)
}

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
