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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

const testKey = "libos/raw-params-test"

// TestRewriteMessage: "tools/call params hold name, arguments and _meta"; any other
// key, or a key twice, must reach the adapter, so such params travel raw. Everything
// else passes byte for byte.
func TestRewriteMessage(t *testing.T) {
	cases := []struct {
		rule    string
		msg     string
		rewrite bool
	}{
		{"plain params pass unchanged", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":1}}}`, false},
		{"params without arguments pass unchanged", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, false},
		{"other methods pass unchanged, whatever their params", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"bogus":1}}`, false},
		{"params that are not an object are the SDK's to refuse", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, false},
		{"a message that is not JSON is the SDK's to refuse", `{"jsonrpc":`, false},
		{"an escaped method name is the same method", `{"jsonrpc":"2.0","id":1,"method":"tools\/\u0063all","params":{"name":"echo","bogus":1}}`, true},
		{"method and params keys match exactly, the last one winning, as in the SDK", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"echo","bogus":1}}`, true},
		{"a method key in other case is not the method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call","method":"ping","params":{"name":"echo","bogus":1}}`, false},
		{"an unknown params key travels raw", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"bogus":1}}`, true},
		{"a key differing only in case travels raw", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"echo","arguments":{}}}`, true},
		{"a duplicated name travels raw", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"other"}}`, true},
		{"keys the SDK knows but MCP params do not hold travel raw", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":"x"}}`, true},
		{"a batch is checked message by message", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","x":1}}]`, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			out, changed := rewriteMessage([]byte(c.msg), testKey)
			if changed != c.rewrite {
				t.Fatalf("changed = %v, want %v: %s", changed, c.rewrite, out)
			}
			if !changed {
				if string(out) != c.msg {
					t.Fatalf("an unchanged message was altered: %s", out)
				}
				return
			}
			// The raw params are under the key, exactly as sent; the SDK can decode
			// what is left.
			var msgs []json.RawMessage
			if c.msg[0] == '[' {
				_ = json.Unmarshal(out, &msgs)
			} else {
				msgs = []json.RawMessage{out}
			}
			found := false
			for _, m := range msgs {
				var req struct {
					Params *mcp.CallToolParamsRaw `json:"params"`
				}
				if err := json.Unmarshal(m, &req); err != nil {
					t.Fatalf("the rewritten message does not decode: %v", err)
				}
				if req.Params == nil {
					continue
				}
				if raw, ok := req.Params.Meta[testKey].(string); ok {
					found = true
					if !strings.Contains(c.msg, raw) {
						t.Errorf("raw params %s are not the params sent in %s", raw, c.msg)
					}
				}
			}
			if !found {
				t.Fatalf("no raw params in %s", out)
			}
		})
	}
}

// TestFilterKeepsTheStream: the stdio filter hands the SDK the bytes it would have read
// (white space, pretty-printed messages, trailing garbage) except for rewritten params.
func TestFilterKeepsTheStream(t *testing.T) {
	s := &Server{rawKey: testKey}
	for _, in := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n",
		"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"ping\"\n}\n\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} {\"id\":2}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\nnot json {\"id\":2}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"unterminated\":",
	} {
		out, err := io.ReadAll(s.filter(strings.NewReader(in), 1<<20))
		if err != nil || string(out) != in {
			t.Errorf("filter(%q) = %q, %v", in, out, err)
		}
	}
	// A message over the limit is passed through untouched, and so is all that follows.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","bogus":"` + strings.Repeat("x", 200) + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","bogus":1}}` + "\n"
	out, err := io.ReadAll(s.filter(strings.NewReader(big), 100))
	if err != nil || string(out) != big {
		t.Errorf("over the limit: %q, %v", out, err)
	}
	// A rewritten message keeps the white space around it.
	in := "\n  " + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","bogus":1}}` + "  \n"
	out, _ = io.ReadAll(s.filter(strings.NewReader(in), 1<<20))
	if !strings.HasPrefix(string(out), "\n  {") || !strings.HasSuffix(string(out), "}  \n") || !strings.Contains(string(out), testKey) {
		t.Errorf("rewritten: %q", out)
	}
}

// bridge is a kernel with one echo process served by a Server.
func bridge(t *testing.T) (*Server, *engine.Kernel, *store.Store, string) {
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
	go func() { done <- s.MCP().Run(ctx, s.Transport(inR, outW)) }()

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
	// A pretty-printed message spanning lines is checked too.
	send("{\n \"jsonrpc\": \"2.0\",\n \"id\": 99,\n \"method\": \"tools/call\",\n \"params\": {\"name\": \"echo\", \"bogus\": true}\n}")
	if r := <-got; r.Error == nil || !strings.Contains(string(r.Error.Data), "protocol_frame") {
		t.Errorf("a multi-line message with an unknown params key: %s %+v", r.Result, r.Error)
	}
	inW.Close()
	<-done
	checkRefusals(t, st, pid, answers, 1) // and the multi-line message
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
