package mcpserver

import (
	"context"
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

// TestOperatorRights: a token's scope says "whether it has operator rights"
// (libos:operator). On a server with authorization, only a client whose token has
// them answers an approval through elicitation, and the approval names the token's
// id beside the client; any other client's call waits for the operator, as a client
// without elicitation's does.
func TestOperatorRights(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}, ApprovalTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	pid := g0spawn(t, k) // echo needs an operator's approval
	opsSecret, ops, _ := NewToken("ops", []string{ProcessScope(pid), ScopeOperator})
	ciSecret, ci, _ := NewToken("ci", []string{ProcessScope(pid)})
	toks, err := ParseTokenFile([]byte(ops + "\n" + ci))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthorizer(AuthConfig{Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(k, pid, Options{Name: "test", Version: "1", Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(hs.Close)
	g := &guarded{k: k, st: st, pid: pid, srv: srv, url: hs.URL}

	connect := func(t *testing.T, version, token string, asked *int) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "approver-test", Version: "7"}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				*asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			},
		})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearerTransport{token}}},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version+": a token with operator rights answers through the client", func(t *testing.T) {
			before := len(g.approvals(t))
			asked := 0
			cs := connect(t, version, opsSecret, &asked)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"v": version}})
			if err != nil || res.IsError {
				t.Fatalf("approved call: %+v, %v", res, err)
			}
			as := g.approvals(t)
			if asked != 1 || len(as) != before+1 || as[before].DecidedBy != "mcp-client approver-test 7 (token ops)" {
				t.Fatalf("asked %d times; approvals = %+v", asked, as[before:])
			}
		})
		t.Run(version+": a token without them leaves the decision to the operator", func(t *testing.T) {
			before := len(g.approvals(t))
			asked := 0
			cs := connect(t, version, ciSecret, &asked)
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"w": version}})
				done <- res
			}()
			var pending engine.Approval
			for pending.ID == "" {
				if as := g.approvals(t); len(as) == before+1 {
					pending = as[before]
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := k.Approve(ctx, pending.ID); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res == nil || res.IsError {
				t.Fatalf("operator-approved call: %+v", res)
			}
			if as := g.approvals(t); asked != 0 || as[before].DecidedBy != "operator" {
				t.Fatalf("asked %d times; approval = %+v", asked, as[before])
			}
		})
	}
	if strings.Contains(g.events(t), opsSecret) {
		t.Fatal("a token is in the audit log")
	}
}
