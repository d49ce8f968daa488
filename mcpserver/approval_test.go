package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// guarded is a kernel with processes of the image testdata/images/approvals.yaml
// (echo needs an operator's approval), the first served over HTTP.
type guarded struct {
	k   *engine.Kernel
	st  *store.Store
	pid string
	srv *Server
	url string
}

func newGuarded(t *testing.T, timeout time.Duration) *guarded {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}, ApprovalTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	g := &guarded{k: k, st: st, pid: g0spawn(t, k)}
	g.srv, err = New(k, g.pid, Options{Name: "test", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.srv.Close)
	hs := httptest.NewServer(g.srv.Handler(nil))
	t.Cleanup(hs.Close)
	g.url = hs.URL
	return g
}

func g0spawn(t *testing.T, k *engine.Kernel) string {
	t.Helper()
	img, err := image.LoadImage(os.DirFS("../testdata/images"), "approvals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := k.SpawnImage(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// connect is a Go SDK client of revision version; elicit answers elicitation
// requests (nil: the client declares no elicitation).
func (g *guarded) connect(t *testing.T, version string, elicit func(*mcp.ElicitRequest) *mcp.ElicitResult) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if elicit != nil {
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return elicit(r), nil }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "approver-test", Version: "7"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (g *guarded) approvals(t *testing.T) []engine.Approval {
	t.Helper()
	as, err := g.k.Approvals(g.pid)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// TestApprovalThroughElicitation: "When the client declares elicitation support, ask
// the human through it: on 2026-07-28 an input_required result whose elicitation
// shows the tool, the exact arguments (or their digest when large), the
// tool-definition hash and what the approval covers; the retry carries the answer.
// ... On 2025-11-25, use the SDK's server-to-client elicitation request during the
// call. Either way the decision is the same durable approval record as libos
// approve (who decided: the MCP client, with its clientInfo), audited."
func TestApprovalThroughElicitation(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			g := newGuarded(t, time.Minute)
			var asked []*mcp.ElicitParams
			answer := true
			cs := g.connect(t, version, func(r *mcp.ElicitRequest) *mcp.ElicitResult {
				asked = append(asked, r.Params)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": answer, "reason": "checked by hand"}}
			})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
			if err != nil || res.IsError {
				t.Fatalf("approved call: %+v, %v", res, err)
			}
			if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"x":1}` {
				t.Fatalf("approved call returned %s", b)
			}
			if len(asked) != 1 {
				t.Fatalf("the client was asked %d times", len(asked))
			}
			as := g.approvals(t)
			if len(as) != 1 || as[0].State != engine.ApprovalUsed || as[0].DecidedBy != "mcp-client approver-test 7" {
				t.Fatalf("approvals = %+v", as)
			}
			a := as[0]
			msg := asked[0].Message
			for _, want := range []string{"echo", `{"x":1}`, a.DefinitionSHA256, "exactly these arguments", a.ID} {
				if !strings.Contains(msg, want) {
					t.Errorf("the elicitation does not show %q:\n%s", want, msg)
				}
			}
			// The same events as the operator's decision, in order (the stateless first
			// round also records its call_rejected with code approval_required).
			types := g.events(t)
			if !inOrder(types, "approval_requested", "approval_decided", "approval_used", "tool_called", "tool_result") {
				t.Errorf("the decision is not audited as the operator's: %s", types)
			}

			// A denial through the client fails the call with approval_denied.
			answer = false
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 2}})
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "approval_denied") {
				t.Fatalf("denied call: %+v, %v", res, err)
			}
			as = g.approvals(t)
			if as[1].State != engine.ApprovalDenied || as[1].Reason != "checked by hand" {
				t.Fatalf("denied approval = %+v", as[1])
			}
		})
	}
}

func inOrder(s string, words ...string) bool {
	for _, w := range words {
		i := strings.Index(s, w)
		if i < 0 {
			return false
		}
		s = s[i+len(w):]
	}
	return true
}

func (g *guarded) events(t *testing.T) string {
	t.Helper()
	evs, err := g.k.Events(g.pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return strings.Join(types, " ")
}

// TestApprovalWithoutElicitation: "without elicitation support the operator path is
// unchanged": the call waits for libos approve.
func TestApprovalWithoutElicitation(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			g := newGuarded(t, time.Minute)
			cs := g.connect(t, version, nil)
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"y": true}})
				done <- res
			}()
			var a engine.Approval
			for a.ID == "" {
				if as := g.approvals(t); len(as) == 1 {
					a = as[0]
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := g.k.Approve(context.Background(), a.ID); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res == nil || res.IsError {
				t.Fatalf("approved call: %+v", res)
			}
			if as := g.approvals(t); as[0].DecidedBy != "operator" || as[0].State != engine.ApprovalUsed {
				t.Fatalf("approval = %+v", as[0])
			}
		})
	}
}

// post sends one stateless tools/call and returns its result or error.
func (g *guarded) post(t *testing.T, params string) rpcResponse {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	req, _ := http.NewRequest("POST", g.url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 {
		b = b[i+6:]
	}
	var r rpcResponse
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	return r
}

const elicitingMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

// TestRequestState: "The requestState is authenticated by the server (an HMAC with a
// key kept in the store) and bound to the process, call, argument digest and
// definition hash, so a tampered, replayed or transplanted state is refused."
func TestRequestState(t *testing.T) {
	g := newGuarded(t, time.Minute)
	first := g.post(t, `{"name":"echo","arguments":{"x":1},`+elicitingMeta+`}`)
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" || ir.InputRequests[approvalInput] == nil {
		t.Fatalf("first round: %s %+v", first.Result, first.Error)
	}
	if !strings.Contains(string(ir.InputRequests[approvalInput]), `"method":"elicitation/create"`) {
		t.Fatalf("input request: %s", ir.InputRequests[approvalInput])
	}
	state, _ := json.Marshal(ir.RequestState)
	yes := `"inputResponses":{"approval":{"action":"accept","content":{"approve":true}}}`
	refused := func(rule, params string) {
		t.Helper()
		r := g.post(t, params)
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(string(r.Error.Data), `"code":"request_state_invalid"`) {
			t.Errorf("%s: %s %+v", rule, r.Result, r.Error)
		}
	}
	// Tampered: any change of the payload or the MAC.
	s := ir.RequestState
	refused("a tampered state", `{"name":"echo","arguments":{"x":1},`+yes+`,"requestState":"`+s+`-TAMPERED",`+elicitingMeta+`}`)
	refused("a state with its payload altered", `{"name":"echo","arguments":{"x":1},`+yes+`,"requestState":"x`+s[1:]+`",`+elicitingMeta+`}`)
	// Transplanted: other arguments, another tool name.
	refused("a state moved to other arguments", `{"name":"echo","arguments":{"x":2},`+yes+`,"requestState":`+string(state)+`,`+elicitingMeta+`}`)
	refused("a state moved to another tool", `{"name":"echo ","arguments":{"x":1},`+yes+`,"requestState":`+string(state)+`,`+elicitingMeta+`}`)
	// Another process of the same store: the key is the store's, the binding the process's.
	other, err := New(g.k, g0spawn(t, g.k), Options{Name: "test", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hs := httptest.NewServer(other.Handler(nil))
	defer hs.Close()
	og := &guarded{url: hs.URL}
	if r := og.post(t, `{"name":"echo","arguments":{"x":1},`+yes+`,"requestState":`+string(state)+`,`+elicitingMeta+`}`); r.Error == nil || !strings.Contains(string(r.Error.Data), "request_state_invalid") {
		t.Errorf("a state moved to another process: %s %+v", r.Result, r.Error)
	}
	if as := g.approvals(t); len(as) != 1 || as[0].State != engine.ApprovalPending {
		t.Fatalf("refused answers decided something: %+v", as)
	}
	// The genuine answer completes the call, once.
	ok := g.post(t, `{"name":"echo","arguments":{"x":1},`+yes+`,"requestState":`+string(state)+`,`+elicitingMeta+`}`)
	if ok.Error != nil || !strings.Contains(string(ok.Result), `"structuredContent":{"x":1}`) || !strings.Contains(string(ok.Result), `"resultType":"complete"`) {
		t.Fatalf("genuine answer: %s %+v", ok.Result, ok.Error)
	}
	refused("a replayed state", `{"name":"echo","arguments":{"x":1},`+yes+`,"requestState":`+string(state)+`,`+elicitingMeta+`}`)
	if as := g.approvals(t); len(as) != 1 || as[0].State != engine.ApprovalUsed || as[0].DecidedBy != "mcp-client raw 1" {
		t.Fatalf("approvals = %+v", as)
	}
	// A retry without a usable answer asks again for the same pending approval.
	again := g.post(t, `{"name":"echo","arguments":{"x":3},`+elicitingMeta+`}`)
	var ir2 struct {
		RequestState string `json:"requestState"`
	}
	_ = json.Unmarshal(again.Result, &ir2)
	st2, _ := json.Marshal(ir2.RequestState)
	wrong := g.post(t, `{"name":"echo","arguments":{"x":3},"inputResponses":{"wrong_key":{"action":"accept","content":{}}},"requestState":`+string(st2)+`,`+elicitingMeta+`}`)
	if wrong.Error != nil || !strings.Contains(string(wrong.Result), `"resultType":"input_required"`) {
		t.Fatalf("a retry without the answer: %s %+v", wrong.Result, wrong.Error)
	}
	if as := g.approvals(t); len(as) != 2 || as[1].State != engine.ApprovalPending {
		t.Fatalf("asking again made another approval: %+v", as)
	}
}
