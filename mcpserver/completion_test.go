package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
)

// completeAll completes every variable of every resource template cs lists, and of
// the audit log and candidates templates whether listed or not, with an empty value:
// what a client can learn from completions. Each answer or error is one line.
func completeAll(ctx context.Context, cs *mcp.ClientSession, t *testing.T) []string {
	t.Helper()
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uris := []string{"libos://process/{pid}/events/after/{seq}", "libos://process/{pid}/candidates/{id}"}
	for _, rt := range tpl.ResourceTemplates {
		if !slices.Contains(uris, rt.URITemplate) {
			uris = append(uris, rt.URITemplate)
		}
	}
	var seen []string
	for _, uri := range uris {
		for _, v := range strings.Split(uri, "{")[1:] {
			name, _, _ := strings.Cut(v, "}")
			res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri},
				Argument: mcp.CompleteParamsArgument{Name: name}})
			b, _ := json.Marshal(res)
			line := "completion/complete " + uri + " " + name + ": " + string(b)
			if err != nil {
				line += " error: " + err.Error()
			}
			seen = append(seen, line)
		}
	}
	return seen
}

// TestCompletion: "completion/complete: support it where the product has
// completable things (Skill prompts' arguments, resource template variables such as
// process ids/candidate names in the direct projection)". Values are filtered by the
// prefix the client typed; what the server does not serve is invalid params.
func TestCompletion(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			_, pid, url := served(t, engine.Direct)
			ctx := context.Background()
			c := mcp.NewClient(&mcp.Implementation{Name: "completer", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Completions == nil {
				t.Fatalf("the completions capability is not declared: %+v", ir)
			}
			author(t, cs)
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "libos://process/" + pid + "/candidates"})
			if err != nil {
				t.Fatal(err)
			}
			var list struct{ Candidates []struct{ ID string } }
			if err := json.Unmarshal([]byte(rr.Contents[0].Text), &list); err != nil || len(list.Candidates) != 1 {
				t.Fatalf("candidates: %s, %v", rr.Contents[0].Text, err)
			}
			cand := list.Candidates[0].ID

			complete := func(uri, arg, value string, given map[string]string) ([]string, error) {
				params := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri},
					Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}}
				if given != nil {
					params.Context = &mcp.CompleteContext{Arguments: given}
				}
				res, err := cs.Complete(ctx, params)
				if err != nil {
					return nil, err
				}
				if res.Completion.Total != len(res.Completion.Values) || res.Completion.HasMore {
					t.Errorf("%s %s: total %d, hasMore %v for %d values", uri, arg, res.Completion.Total, res.Completion.HasMore, len(res.Completion.Values))
				}
				return res.Completion.Values, nil
			}
			for _, tc := range []struct {
				uri, arg, value string
				given           map[string]string
				want            []string
			}{
				{"skill://{name}/SKILL.md", "name", "", nil, []string{"jit-authoring", "protocol-diagnostics"}},
				{"skill://{name}/SKILL.md", "name", "jit", nil, []string{"jit-authoring"}},
				{"skill://{name}/SKILL.md", "name", "zz", nil, []string{}},
				{"libos://process/{pid}/events/after/{seq}", "pid", "pid_", nil, []string{pid}},
				{"libos://process/{pid}/events/after/{seq}", "pid", "other", nil, []string{}},
				{"libos://process/{pid}/events/after/{seq}", "seq", "1", nil, []string{}},
				{"libos://process/{pid}/candidates/{id}", "pid", "", nil, []string{pid}},
				{"libos://process/{pid}/candidates/{id}", "id", "tcand_", map[string]string{"pid": pid}, []string{cand}},
				{"libos://process/{pid}/candidates/{id}", "id", cand[:10], nil, []string{cand}},
				{"libos://process/{pid}/candidates/{id}", "id", "", map[string]string{"pid": "pid_other"}, []string{}},
			} {
				got, err := complete(tc.uri, tc.arg, tc.value, tc.given)
				if err != nil || !slices.Equal(got, tc.want) {
					t.Errorf("complete %s %s=%q: %q, %v; want %q", tc.uri, tc.arg, tc.value, got, err, tc.want)
				}
			}
			// What the server does not serve: invalid params, never an empty success.
			for _, tc := range []struct{ uri, arg string }{
				{"test://template/{id}/data", "id"},
				{"skill://{name}/SKILL.md", "version"},
				{"libos://process/{pid}/candidates/{id}", "name"},
			} {
				var rpcErr *jsonrpc.Error
				if got, err := complete(tc.uri, tc.arg, "", nil); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("complete %s %s: %q, %v; want invalid params", tc.uri, tc.arg, got, err)
				}
			}
			// Prompts are the image's Skills: they take no arguments.
			for _, name := range []string{"jit-authoring", "test_prompt_with_arguments"} {
				res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: name},
					Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "x"}})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("completing an argument of prompt %s: %+v; want invalid params", name, res)
				}
			}
		})
	}
}
