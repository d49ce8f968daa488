package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
)

// TestParamHeaders: a JIT tool whose input schema mirrors an argument into a header
// (x-mcp-header, SEP-2243) is listed with the annotation, and a stateless tools/call
// over HTTP is checked against it: "Server MUST reject requests where custom header
// is omitted but value is in body", and a header that disagrees with the body is a
// HeaderMismatch (-32020, HTTP 400); one that agrees (literal or =?base64?…?=) is
// served.
func TestParamHeaders(t *testing.T) {
	_, _, url := served(t, engine.Direct)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "param-headers", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}
	obj := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	id := call("propose_jit_tool", map[string]any{
		"name": "route_hint", "description": "Names the region a request is for.",
		"source_code":   "export function run(args: { region: string }, libos: any) {\n  return { region: args.region };\n}\n",
		"input_schema":  obj(`{"type":"object","properties":{"region":{"type":"string","maxLength":64,"x-mcp-header":"Region"}},"required":["region"],"additionalProperties":false}`),
		"output_schema": obj(`{"type":"object","properties":{"region":{"type":"string"}},"required":["region"],"additionalProperties":false}`),
		"tests":         []any{obj(`{"args":{"region":"eu"},"expected":{"region":"eu"},"syscalls":[]}`)},
	})["candidate_id"]
	if call("validate_jit_tool", map[string]any{"candidate_id": id})["ok"] != true {
		t.Fatal("validation failed")
	}
	call("register_jit_tool", map[string]any{"candidate_id": id})
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tool := range tl.Tools {
		if b, _ := json.Marshal(tool.InputSchema); tool.Name == "route_hint" && strings.Contains(string(b), `"x-mcp-header":"Region"`) {
			listed = true
		}
	}
	if !listed {
		t.Fatal("route_hint is not listed with its x-mcp-header annotation")
	}

	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"route_hint","arguments":{"region":"eu-west"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	post := func(region *string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "route_hint")
		if region != nil {
			req.Header.Set("Mcp-Param-Region", *region)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	str := func(s string) *string { return &s }
	for _, h := range []*string{str("eu-west"), str("=?base64?ZXUtd2VzdA==?=")} {
		if code, out := post(h); code != http.StatusOK || !strings.Contains(out, `"structuredContent":{"region":"eu-west"}`) {
			t.Errorf("Mcp-Param-Region %q: HTTP %d %s", *h, code, out)
		}
	}
	for _, h := range []*string{nil, str("us-east"), str("=?base64?ZXUtd2VzdA?=")} {
		code, out := post(h)
		if code != http.StatusBadRequest || !strings.Contains(out, `"code":-32020`) {
			t.Errorf("Mcp-Param-Region %v: HTTP %d %s; want 400 with -32020", h, code, out)
		}
	}
}
