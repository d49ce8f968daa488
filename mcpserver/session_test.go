package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/mcpserver"
	"github.com/agentlibos/libos/store"
)

// served is a libOS process of the default image, with the given projection,
// served over streamable HTTP.
func served(t *testing.T, proj engine.Projection) (*libos.System, string, string) {
	t.Helper()
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	img.Projection = proj
	return servedImage(t, img)
}

// servedImage is a libOS process of img served over streamable HTTP.
func servedImage(t *testing.T, img *image.Image) (*libos.System, string, string) {
	t.Helper()
	ctx := context.Background()
	sys, err := libos.Open(ctx, t.TempDir(), libos.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sys.MCPServer(pid, mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(hs.Close)
	return sys, pid, hs.URL
}

// author proposes, validates and registers the clock_now candidate of
// testdata/candidates through the client.
func author(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile("../testdata/candidates/good_clock_now.json")
	if err != nil {
		t.Fatal(err)
	}
	var cand map[string]any
	if err := json.Unmarshal(raw, &cand); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return out
	}
	id := call("propose_jit_tool", cand)["candidate_id"]
	if ok := call("validate_jit_tool", map[string]any{"candidate_id": id})["ok"]; ok != true {
		t.Fatalf("validate_jit_tool: ok = %v", ok)
	}
	call("register_jit_tool", map[string]any{"candidate_id": id})
}

// TestJITSessionGoClient: "The Go SDK client ... drive[s] a full JIT session on each
// revision: register → list_changed received → call the new tool; an approval
// answered through elicitation; a cancelled long call." One session per revision and
// projection, of the image testdata/images/jit-session.yaml (echo needs an
// approval): the decision is the durable approval record, decided by the client as
// it names itself ("who decided: the MCP client, with its clientInfo"); the
// cancelled call settles as canceled ("notifications/cancelled stops the running
// call's guest ... and settles the call as cancelled in the audit log"), and the log
// verifies.
func TestJITSessionGoClient(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		for _, proj := range []engine.Projection{engine.Direct, engine.Multiplexed} {
			t.Run(version+"/"+string(proj), func(t *testing.T) {
				img, err := image.LoadImage(os.DirFS("../testdata/images"), "jit-session.yaml")
				if err != nil {
					t.Fatal(err)
				}
				img.Projection = proj
				sys, pid, url := servedImage(t, img)
				var changed atomic.Int32
				var asked atomic.Int32
				c := mcp.NewClient(&mcp.Implementation{Name: "session-test", Version: "1"}, &mcp.ClientOptions{
					ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
					ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "reason": "checked in the Go client"}}, nil
					},
				})
				ctx := context.Background()
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				// A JIT tool is called by its name (direct) or through run_jit_tool.
				jit := func(name string, args map[string]any) *mcp.CallToolParams {
					if proj == engine.Multiplexed {
						return &mcp.CallToolParams{Name: "run_jit_tool", Arguments: map[string]any{"tool_name": name, "arguments": args}}
					}
					return &mcp.CallToolParams{Name: name, Arguments: args}
				}

				// Register, list_changed, call.
				author(t, cs)
				for i := 0; i < 400 && changed.Load() == 0; i++ {
					time.Sleep(25 * time.Millisecond)
				}
				if changed.Load() == 0 {
					t.Fatal("no notifications/tools/list_changed after the registration")
				}
				res, err := cs.CallTool(ctx, jit("clock_now", map[string]any{"timezone": "UTC"}))
				if err != nil || res.IsError {
					t.Fatalf("calling the new tool: %+v, %v", res, err)
				}
				if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"timezone":"UTC"`) {
					t.Fatalf("the new tool returned %s", b)
				}

				// An approval, answered through the client's elicitation.
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
				if err != nil || res.IsError {
					t.Fatalf("the approved call: %+v, %v", res, err)
				}
				as, err := sys.Approvals(pid)
				if err != nil {
					t.Fatal(err)
				}
				if asked.Load() != 1 || len(as) != 1 || as[0].Subject != "echo" || as[0].State != engine.ApprovalUsed ||
					as[0].DecidedBy != "mcp-client session-test 1" || as[0].Reason != "checked in the Go client" {
					t.Fatalf("asked %d times; approvals = %+v", asked.Load(), as)
				}

				// A long call, cancelled by the client once it runs.
				register(t, cs, spinner)
				callCtx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(callCtx, jit("spin", map[string]any{"n": 1 << 52}))
					done <- err
				}()
				callID := waitCalled(t, sys, pid, "spin")
				cancel()
				if err := <-done; err == nil {
					t.Fatal("the cancelled call returned a result")
				}
				if ev := waitSettled(t, sys, pid, callID); ev.Type != "tool_failed" || !strings.Contains(string(ev.Data), `"code":"canceled"`) {
					t.Fatalf("the cancelled call settled as %s %s", ev.Type, ev.Data)
				}
				if err := sys.VerifyLog(pid); err != nil {
					t.Fatalf("the log does not verify: %v", err)
				}
			})
		}
	}
}

// register proposes, validates and registers candidate through the client.
func register(t *testing.T, cs *mcp.ClientSession, candidate map[string]any) {
	t.Helper()
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "propose_jit_tool", Arguments: candidate})
	if err != nil || res.IsError {
		t.Fatalf("propose: %+v, %v", res, err)
	}
	id := res.StructuredContent.(map[string]any)["candidate_id"]
	for _, step := range []string{"validate_jit_tool", "register_jit_tool"} {
		if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: step, Arguments: map[string]any{"candidate_id": id}}); err != nil || res.IsError {
			t.Fatalf("%s: %+v, %v", step, res, err)
		}
	}
}

// waitCalled waits for the log of pid to show a call of tool running, and returns
// its call ID.
func waitCalled(t *testing.T, sys *libos.System, pid, tool string) string {
	t.Helper()
	for {
		evs, err := sys.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == "tool_called" && strings.Contains(string(e.Data), `"tool":"`+tool+`"`) {
				return e.CallID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSettled waits for the log of pid to settle call callID, and returns the event
// that settled it.
func waitSettled(t *testing.T, sys *libos.System, pid, callID string) store.Event {
	t.Helper()
	for {
		evs, err := sys.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.CallID == callID && e.Type != "tool_called" && e.Type != "syscall" {
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMultiplexedListingsHideJITTools: "In the multiplexed projection nothing — no
// resource, prompt, template, completion or error message — reveals a JIT tool's name
// or schema ... a test enumerates every listing in that mode and finds none."
func TestMultiplexedListingsHideJITTools(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			_, pid, url := served(t, engine.Multiplexed)
			ctx := context.Background()
			c := mcp.NewClient(&mcp.Implementation{Name: "enumerator", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			author(t, cs)
			// Everything a client can list or read, and the errors it can provoke.
			var seen []string
			add := func(what string, v any, err error) {
				b, _ := json.Marshal(v)
				seen = append(seen, what+": "+string(b))
				if err != nil {
					seen = append(seen, what+" error: "+err.Error())
				}
			}
			tl, err := cs.ListTools(ctx, nil)
			add("tools/list", tl, err)
			rl, err := cs.ListResources(ctx, nil)
			add("resources/list", rl, err)
			if rl == nil || len(rl.Resources) == 0 {
				t.Fatal("no resources listed: the enumeration would prove nothing")
			}
			for _, r := range rl.Resources {
				rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
				add("resources/read "+r.URI, rr, err)
			}
			tpl, err := cs.ListResourceTemplates(ctx, nil)
			add("resources/templates/list", tpl, err)
			pl, err := cs.ListPrompts(ctx, nil)
			add("prompts/list", pl, err)
			for _, p := range pl.Prompts {
				gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name})
				add("prompts/get "+p.Name, gp, err)
			}
			// The resources that name JIT tools under the direct projection, and
			// guesses at JIT names, are refused like any unknown resource or prompt.
			for _, uri := range []string{"libos://process/" + pid + "/events", "libos://process/" + pid + "/candidates",
				"libos://process/" + pid + "/events/after/0"} {
				rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err == nil {
					t.Errorf("%s is readable under the multiplexed projection", uri)
				}
				add("resources/read "+uri, rr, err)
			}
			// A guess at the JIT name is answered exactly as a name nobody registered
			// (the answer may echo the name the client sent, nothing more).
			for _, probe := range []func(name string) (any, error){
				func(n string) (any, error) {
					return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://" + n + "/SKILL.md"})
				},
				func(n string) (any, error) {
					return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "libos://process/" + pid + "/candidates/" + n})
				},
				func(n string) (any, error) { return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: n}) },
				func(n string) (any, error) {
					return cs.CallTool(ctx, &mcp.CallToolParams{Name: n, Arguments: map[string]any{"timezone": "UTC"}})
				},
			} {
				r1, e1 := probe("clock_now")
				r2, e2 := probe("zz_unknown")
				b1, _ := json.Marshal(r1)
				b2, _ := json.Marshal(r2)
				s1 := strings.ReplaceAll(string(b1)+fmt.Sprint(e1), "clock_now", "NAME")
				s2 := strings.ReplaceAll(string(b2)+fmt.Sprint(e2), "zz_unknown", "NAME")
				if s1 != s2 {
					t.Errorf("a registered JIT name is answered differently from an unknown one:\n%s\n%s", s1, s2)
				}
			}
			cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "jit-authoring"},
				Argument: mcp.CompleteParamsArgument{Name: "tool", Value: "clock"}})
			add("completion/complete", cr, err)
			seen = append(seen, completeAll(ctx, cs, t)...)
			// The candidates template, served under the direct projection only, is
			// answered as a template nobody serves.
			hiddenTpl, unknownTpl := "libos://process/{pid}/candidates/{id}", "libos://process/{pid}/zz/{id}"
			_, e1 := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: hiddenTpl}, Argument: mcp.CompleteParamsArgument{Name: "id"}})
			_, e2 := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: unknownTpl}, Argument: mcp.CompleteParamsArgument{Name: "id"}})
			if e1 == nil || strings.ReplaceAll(e1.Error(), hiddenTpl, "T") != strings.ReplaceAll(e2.Error(), unknownTpl, "T") {
				t.Errorf("a hidden template completes unlike an unknown one: %v / %v", e1, e2)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_jit_tool", Arguments: map[string]any{"tool_name": "clock_nw", "arguments": map[string]any{}}})
			add("tools/call of a misspelt JIT name", res, err)
			all := strings.Join(seen, "\n")
			// The name, the description and the input schema as the direct projection
			// lists it (the jit-authoring Skill shows the same program and route, which
			// are not the tool's).
			schema := `{"additionalProperties":false,"properties":{"timezone":{"maxLength":64,"type":"string"}},"required":["timezone"],"type":"object"}`
			for _, secret := range []string{"clock_now", "Return the current time in a named IANA time zone", schema} {
				if strings.Contains(all, secret) {
					t.Errorf("a listing reveals %q:\n%s", secret, all)
				}
			}
		})
	}
}

// spinner is a candidate whose call runs for as long as its argument asks: a loop
// of n rounds, with three quick tests (three steps of validation progress).
var spinner = map[string]any{
	"name":        "spin",
	"description": "Count to n.",
	"source_code": "export function run(args: { n: number }, libos: any) {\n  let i = 0;\n  while (i < args.n) { i++; }\n  return { counted: i };\n}\n",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0}},
		"required": []string{"n"}, "additionalProperties": false},
	"output_schema": map[string]any{"type": "object", "properties": map[string]any{"counted": map[string]any{"type": "integer"}},
		"required": []string{"counted"}, "additionalProperties": false},
	"tests": []map[string]any{
		{"args": map[string]any{"n": 0}, "expected": map[string]any{"counted": 0}, "syscalls": []any{}},
		{"args": map[string]any{"n": 1}, "expected": map[string]any{"counted": 1}, "syscalls": []any{}},
		{"args": map[string]any{"n": 2}, "expected": map[string]any{"counted": 2}, "syscalls": []any{}},
	},
}

// TestProgressAndCancellation: "progress notifications during a long
// validate_jit_tool (one per test) when the client sends a progress token;
// notifications/cancelled stops the running call's guest within its poll interval
// and settles the call as cancelled in the audit log".
func TestProgressAndCancellation(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			sys, pid, url := served(t, engine.Direct)
			var mu sync.Mutex
			var steps []float64
			c := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					steps = append(steps, r.Params.Progress)
					mu.Unlock()
				},
			})
			ctx := context.Background()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "propose_jit_tool", Arguments: spinner})
			if err != nil || res.IsError {
				t.Fatalf("propose: %+v, %v", res, err)
			}
			id := res.StructuredContent.(map[string]any)["candidate_id"]
			vp := &mcp.CallToolParams{Name: "validate_jit_tool", Arguments: map[string]any{"candidate_id": id}}
			vp.SetProgressToken("validation")
			if res, err = cs.CallTool(ctx, vp); err != nil || res.IsError {
				t.Fatalf("validate: %+v, %v", res, err)
			}
			// The server sends each notification before the result, but the client
			// hands notifications to their handler apart from results: the last may
			// reach the handler after CallTool returned.
			var got []float64
			for i := 0; i < 200; i++ {
				mu.Lock()
				got = append([]float64(nil), steps...)
				mu.Unlock()
				if len(got) >= 3 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(got) != 3 || got[2] != 3 {
				t.Fatalf("progress notifications = %v, want one per test (1, 2, 3)", got)
			}
			if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "register_jit_tool", Arguments: map[string]any{"candidate_id": id}}); err != nil || res.IsError {
				t.Fatalf("register: %+v, %v", res, err)
			}

			// A call that would count for a very long time, cancelled once it runs.
			callCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "spin", Arguments: map[string]any{"n": 1 << 52}})
				done <- err
			}()
			callID := ""
			for callID == "" {
				evs, _ := sys.Events(pid, 0, 0)
				for _, e := range evs {
					if e.Type == "tool_called" && strings.Contains(string(e.Data), `"tool":"spin"`) {
						callID = e.CallID
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the cancelled call returned a result")
			}
			// The guest stops and the call is settled, with the code canceled.
			for {
				evs, _ := sys.Events(pid, 0, 0)
				last := evs[len(evs)-1]
				if last.CallID == callID && last.Type != "tool_called" {
					if last.Type != "tool_failed" || !strings.Contains(string(last.Data), `"code":"canceled"`) {
						t.Fatalf("the cancelled call settled as %s %s", last.Type, last.Data)
					}
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestToolAnnotations: "Tool annotations derived from what the libOS knows (echo
// read-only; JIT tools neither idempotent nor read-only; tools reaching net:*
// open-world)", and outputSchema for every tool that has one.
func TestToolAnnotations(t *testing.T) {
	_, _, url := served(t, engine.Direct)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "annotations", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	author(t, cs)
	fetcher := map[string]any{
		"name": "fetch_status", "description": "Fetch a page and return its status.",
		"source_code": "export async function run(args: { url: string }, libos: any) {\n  const r = await libos.syscall(\"net.fetch\", { url: args.url });\n  return { status: Number(r.status) };\n}\n",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string", "maxLength": 200}},
			"required": []string{"url"}, "additionalProperties": false},
		"output_schema": map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "integer"}},
			"required": []string{"status"}, "additionalProperties": false},
		"tests": []any{},
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "propose_jit_tool", Arguments: fetcher})
	if err != nil || res.IsError {
		t.Fatalf("propose: %+v, %v", res, err)
	}
	id := res.StructuredContent.(map[string]any)["candidate_id"]
	if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "register_jit_tool", Arguments: map[string]any{"candidate_id": id}}); err != nil || res.IsError {
		t.Fatalf("register: %+v, %v", res, err)
	}
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*mcp.Tool{}
	for _, tool := range tl.Tools {
		by[tool.Name] = tool
		if tool.OutputSchema == nil && tool.Name != "run_jit_tool" {
			t.Errorf("%s has no outputSchema", tool.Name)
		}
	}
	if a := by["echo"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("echo is not read-only: %+v", a)
	}
	for _, name := range []string{"clock_now", "fetch_status"} {
		a := by[name].Annotations
		if a == nil || a.ReadOnlyHint || a.IdempotentHint {
			t.Errorf("JIT tool %s: %+v, want neither read-only nor idempotent", name, a)
		}
	}
	if a := by["clock_now"].Annotations; a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("clock_now reaches no net route but is open-world: %+v", a)
	}
	if a := by["fetch_status"].Annotations; a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("fetch_status reaches net.fetch but is not open-world: %+v", a)
	}
}

// TestStatelessCallCancelledByClosingItsRequest: a 2026-07-28 client may cancel a
// call by closing the HTTP request that carries it instead of sending
// notifications/cancelled (the TypeScript SDK's client does): that too "stops the
// running call's guest within its poll interval and settles the call as cancelled in
// the audit log".
func TestStatelessCallCancelledByClosingItsRequest(t *testing.T) {
	// The image whose JIT calls may run a minute: the call ends by its cancellation,
	// never by its wall time.
	img, err := image.LoadImage(os.DirFS("../testdata/images"), "jit-session.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sys, pid, url := servedImage(t, img)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "closer", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	register(t, cs, spinner)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"spin","arguments":{"n":4503599627370496},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
	reqCtx, closeRequest := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(reqCtx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "spin")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	callID := waitCalled(t, sys, pid, "spin")
	closeRequest()
	if err := <-done; err == nil {
		t.Fatal("the closed request was answered")
	}
	if ev := waitSettled(t, sys, pid, callID); ev.Type != "tool_failed" || !strings.Contains(string(ev.Data), `"code":"canceled"`) {
		t.Fatalf("the call whose request was closed settled as %s %s", ev.Type, ev.Data)
	}
}
