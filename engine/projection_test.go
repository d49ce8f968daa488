package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

const jitIn = `{"type":"object","properties":{"records":{"type":"array","maxItems":3}},"required":["records"],"additionalProperties":false}`
const jitOut = `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`

// jitTool is a JIT-kind tool whose handler is a plain Go func (the sandbox is not
// part of this package); it counts its runs.
func jitTool(runs *atomic.Int64) engine.Tool {
	return engine.Tool{
		Name: "normalize_records", Description: "Normalize bounded record labels and return counts.",
		InputSchema: json.RawMessage(jitIn), OutputSchema: json.RawMessage(jitOut),
		Kind: engine.KindJIT, ID: "tool_0123456789abcdef0123456789abcdef",
		Annotations: engine.Annotations{Destructive: true},
		Handler: func(_ context.Context, c *engine.Call) (json.RawMessage, error) {
			runs.Add(1)
			var a struct{ Records []any }
			if err := json.Unmarshal(c.Args, &a); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]int{"count": len(a.Records)})
		},
	}
}

func installJIT(t *testing.T, e *env, pid string, runs *atomic.Int64) {
	t.Helper()
	if err := e.k.InstallTool(context.Background(), pid, jitTool(runs), nil); err != nil {
		t.Fatal(err)
	}
}

func names(defs []render.Tool) string {
	var s []string
	for _, d := range defs {
		s = append(s, d.Name)
	}
	return strings.Join(s, ",")
}

// TestProjectionDirect: "In direct projection, invoke the registered JIT tool's actual
// function name with arguments matching its stored input schema."
func TestProjectionDirect(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Projection: engine.Direct})
	var runs atomic.Int64
	installJIT(t, e, pid, &runs)
	defs, err := e.k.Tools(pid)
	if err != nil || names(defs) != "echo,normalize_records" {
		t.Fatalf("direct list %q %v: JIT tools appear as functions, run_jit_tool does not", names(defs), err)
	}
	if string(defs[1].InputSchema) != `{"additionalProperties":false,"properties":{"records":{"maxItems":3,"type":"array"}},"required":["records"],"type":"object"}` {
		t.Fatalf("JIT tool shown without its stored input schema: %s", defs[1].InputSchema)
	}
	ctx := context.Background()
	cases := []struct {
		rule, frame, code, want string
		runs                    int64
	}{
		{"invoke the registered JIT tool's actual function name", `{"name":"normalize_records","arguments":"{\"records\":[1,2]}"}`, "", `{"count":2}`, 1},
		{"a deliberately schema-invalid case that must be rejected before execution", `{"name":"normalize_records","input":{"records":[1,2,3,4]}}`, "schema_invalid", "", 0},
		{"a deliberately schema-invalid case that must be rejected before execution (closed schema)", `{"name":"normalize_records","input":{"records":[],"extra":1}}`, "schema_invalid", "", 0},
		{"run_jit_tool exists only in the multiplexed projection", `{"name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":{"records":[]}}}`, "unknown_tool", "", 0},
	}
	for _, c := range cases {
		runs.Store(0)
		r, err := e.k.HandleFrame(ctx, pid, []byte(c.frame))
		if codeOf(err) != c.code || runs.Load() != c.runs {
			t.Fatalf("rule %q: code %q (%v), ran %d", c.rule, codeOf(err), err, runs.Load())
		}
		if c.want != "" && string(r.Structured) != c.want {
			t.Fatalf("rule %q: result %s", c.rule, r.Structured)
		}
	}
}

// TestProjectionMultiplexed checks the multiplexed projection of the protocol-diagnostics Skill: "invoke the
// model-facing pseudo-function run_jit_tool with exactly {"tool_name":
// "registered_name","arguments":{...}}. The field is tool_name, not name. A direct call
// to the registered JIT name is rejected in this mode, and the nested arguments object
// is validated against that JIT tool's schema."
func TestProjectionMultiplexed(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Projection: engine.Multiplexed})
	var runs atomic.Int64
	installJIT(t, e, pid, &runs)

	defs, err := e.k.Tools(pid)
	if err != nil || names(defs) != "echo,run_jit_tool" {
		t.Fatalf("multiplexed list %q %v", names(defs), err)
	}
	for _, p := range []render.Provider{render.MCP, render.OpenAI, render.Anthropic} {
		out, err := render.Tools(defs, p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "normalize_records") || strings.Contains(string(out), "records") {
			t.Fatalf("%s rendering reveals a JIT name or schema: %s", p, out)
		}
	}
	var mux render.Tool
	for _, d := range defs {
		if d.Name == engine.RunJITTool {
			mux = d
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(mux.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["additionalProperties"] != false || len(schema["properties"].(map[string]any)) != 2 {
		t.Fatalf("run_jit_tool schema is not exactly {tool_name, arguments} with additionalProperties:false: %s", mux.InputSchema)
	}

	cases := []struct {
		name, rule, frame, code, want, mention string
		runs                                   int64
	}{
		{"envelope", "invoke ... run_jit_tool with exactly {\"tool_name\":\"registered_name\",\"arguments\":{...}}",
			`{"name":"run_jit_tool","arguments":"{\"tool_name\":\"normalize_records\",\"arguments\":{\"records\":[\"a\"]}}"}`, "", `{"count":1}`, "", 1},
		{"envelope-anthropic", "invoke ... run_jit_tool with exactly {\"tool_name\":\"registered_name\",\"arguments\":{...}}",
			`{"type":"tool_use","id":"t1","name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":{"records":[]}}}`, "", `{"count":0}`, "", 1},
		{"name-not-tool_name", "The field is tool_name, not name.",
			`{"name":"run_jit_tool","input":{"name":"normalize_records","arguments":{"records":[]}}}`, "schema_invalid", "", "tool_name", 0},
		{"extra-key", "exactly {\"tool_name\", \"arguments\"} (additionalProperties:false)",
			`{"name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":{"records":[]},"mode":"fast"}}`, "schema_invalid", "", "mode", 0},
		{"missing-arguments", "exactly {\"tool_name\", \"arguments\"}",
			`{"name":"run_jit_tool","input":{"tool_name":"normalize_records"}}`, "schema_invalid", "", "arguments", 0},
		{"arguments-not-object", "exactly {\"tool_name\": string, \"arguments\": object}",
			`{"name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":"{\"records\":[]}"}}`, "schema_invalid", "", "arguments", 0},
		{"tool_name-not-string", "exactly {\"tool_name\": string, \"arguments\": object}",
			`{"name":"run_jit_tool","input":{"tool_name":7,"arguments":{}}}`, "schema_invalid", "", "tool_name", 0},
		{"nested-validated", "the nested arguments object is validated against that JIT tool's schema",
			`{"name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":{"records":[1,2,3,4]}}}`, "schema_invalid", "", "normalize_records", 0},
		{"nested-closed", "the nested arguments object is validated against that JIT tool's schema",
			`{"name":"run_jit_tool","input":{"tool_name":"normalize_records","arguments":{}}}`, "schema_invalid", "", "records", 0},
		{"direct-call-rejected", "A direct call to the registered JIT name is rejected in this mode",
			`{"name":"normalize_records","input":{"records":[]}}`, "unknown_tool", "", "", 0},
		{"unknown-jit", "Unknown or hidden tool names are projection or process-tool-table failures",
			`{"name":"run_jit_tool","input":{"tool_name":"guessed_name","arguments":{}}}`, "unknown_tool", "", "", 0},
		{"routes-only-jit", "It only routes model calls to a process-local JIT tool",
			`{"name":"run_jit_tool","input":{"tool_name":"echo","arguments":{"a":1}}}`, "unknown_tool", "", "", 0},
		{"top-level-action-of-envelope", "removes any top-level action argument (of the run_jit_tool call)",
			`{"name":"run_jit_tool","input":{"action":"normalize_records","tool_name":"normalize_records","arguments":{"records":[]}}}`, "", `{"count":0}`, "", 1},
		{"echo-still-direct", "the model sees the process tools plus one pseudo-function run_jit_tool",
			`{"name":"echo","input":{"a":1}}`, "", `{"a":1}`, "", 0},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs.Store(0)
			before := len(e.events(t, pid))
			r, err := e.k.HandleFrame(ctx, pid, []byte(c.frame))
			if codeOf(err) != c.code || runs.Load() != c.runs {
				t.Fatalf("rule %q: code %q (%v), ran %d", c.rule, codeOf(err), err, runs.Load())
			}
			if c.mention != "" && !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("rule %q: message %q does not name %q", c.rule, err, c.mention)
			}
			if c.want != "" && string(r.Structured) != c.want {
				t.Fatalf("rule %q: result %s", c.rule, r.Structured)
			}
			evs := e.events(t, pid)[before:]
			if c.code == "" {
				if got := strings.Join(types(evs), ","); got != "tool_called,tool_result" {
					t.Fatalf("events %s", got)
				}
				if c.runs > 0 && (field(t, evs[0], "tool") != "normalize_records" || field(t, evs[0], "action") != engine.RunJITTool) {
					t.Fatalf("tool_called of a routed call: %s", evs[0].Data)
				}
			} else if got := strings.Join(types(evs), ","); got != "call_rejected" {
				t.Fatalf("events %s", got)
			}
		})
	}
}

// TestHostAPI: run_jit_tool "cannot be called through runtime.tools.call"; the host
// reaches JIT tools by their table names in both modes.
func TestHostAPI(t *testing.T) {
	e := newEnv(t, engine.Config{})
	ctx := context.Background()
	for _, proj := range []engine.Projection{engine.Direct, engine.Multiplexed} {
		pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Projection: proj})
		var runs atomic.Int64
		installJIT(t, e, pid, &runs)
		_, err := e.k.Runtime().Tools.Call(ctx, pid, engine.RunJITTool, []byte(`{"tool_name":"normalize_records","arguments":{"records":[]}}`))
		if codeOf(err) != "unknown_tool" || runs.Load() != 0 {
			t.Fatalf("%s: runtime.tools.call(run_jit_tool) = %v", proj, err)
		}
		r, err := e.k.Runtime().Tools.Call(ctx, pid, "normalize_records", []byte(`{"records":[1]}`))
		if err != nil || string(r.Structured) != `{"count":1}` {
			t.Fatalf("%s: host call of a JIT tool: %v", proj, err)
		}
		out, err := e.k.Runtime().Tools.CallTool(ctx, pid, "echo", nil, 1)
		if err != nil || string(out) != `{}` {
			t.Fatalf("%s: tools.call of echo with no arguments: %s %v", proj, out, err)
		}
		for _, bad := range []string{`[]`, `"x"`, `{"a":1,"a":1}`, `{`} {
			if _, err := e.k.Runtime().Tools.Call(ctx, pid, "echo", []byte(bad)); codeOf(err) != "protocol_frame" {
				t.Fatalf("%s: host arguments %s: %v", proj, bad, err)
			}
		}
		// One rule for a tool name on every path (TestToolNameConfusion has the table):
		// ASCII white space is trimmed, nothing else.
		if _, err := e.k.Runtime().Tools.Call(ctx, pid, "\u00a0echo", nil); codeOf(err) != "unknown_tool" {
			t.Fatalf("the host API trims only ASCII white space: %v", err)
		}
	}
}

// TestInstallTool: the JIT lifecycle installs an entry atomically with its durable
// binding, and subscribers hear about it.
func TestInstallTool(t *testing.T) {
	e := newEnv(t, engine.Config{})
	ctx := context.Background()
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	var notified []string
	unsub := e.k.OnToolsChanged(func(p string) { notified = append(notified, p) })
	defer unsub()
	var runs atomic.Int64
	tool := jitTool(&runs)
	bind := func(tx *store.Tx) error {
		return tx.AddBinding(store.Binding{PID: pid, Name: tool.Name, ToolID: tool.ID, CandidateID: "tcand_x", Scope: "ephemeral_process"})
	}

	// A failing durable write installs nothing and records nothing.
	boom := errors.New("binding refused")
	if err := e.k.InstallTool(ctx, pid, tool, func(*store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if info, _ := e.k.Process(pid); len(info.Tools) != 1 || len(notified) != 0 {
		t.Fatalf("failed install changed the table: %v, notified %v", info.Tools, notified)
	}
	if got := strings.Join(types(e.events(t, pid)), ","); got != "process_spawned" {
		t.Fatalf("events after a failed install: %s", got)
	}

	if err := e.k.InstallTool(ctx, pid, tool, bind); err != nil {
		t.Fatal(err)
	}
	if b, err := e.st.Binding(pid, tool.Name); err != nil || b.ToolID != tool.ID {
		t.Fatalf("binding not durable: %v", err)
	}
	info, _ := e.k.Process(pid)
	if info.Tools["normalize_records"] != engine.KindJIT || info.Tools["echo"] != engine.KindBuiltin {
		t.Fatalf("table kinds %v", info.Tools)
	}
	if len(notified) != 1 || notified[0] != pid {
		t.Fatalf("notified %v", notified)
	}
	evs := e.events(t, pid)
	if last := evs[len(evs)-1]; last.Type != engine.EventToolsChanged || field(t, last, "tool") != "normalize_records" {
		t.Fatalf("no tools_changed event: %s", last.Data)
	}

	// Collisions: with the JIT tool itself and with a built-in.
	if err := e.k.InstallTool(ctx, pid, tool, nil); codeOf(err) != "tool_conflict" {
		t.Fatalf("second install: %v", err)
	}
	echoJIT := tools.Echo()
	echoJIT.Kind = engine.KindJIT
	if err := e.k.InstallTool(ctx, pid, echoJIT, nil); codeOf(err) != "tool_conflict" {
		t.Fatalf("install over a built-in: %v", err)
	}
	reserved := jitTool(&runs)
	reserved.Name = engine.RunJITTool
	if err := e.k.InstallTool(ctx, pid, reserved, nil); codeOf(err) != "invalid_tool" {
		t.Fatalf("install run_jit_tool: %v", err)
	}
	if err := e.k.InstallTool(ctx, pid, tools.Echo(), nil); codeOf(err) != "invalid_tool" {
		t.Fatalf("install a built-in kind: %v", err)
	}

	// Removal.
	if err := e.k.RemoveTool(ctx, pid, "echo", nil); codeOf(err) != "tool_conflict" {
		t.Fatalf("removed a built-in: %v", err)
	}
	if err := e.k.RemoveTool(ctx, pid, tool.Name, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.HandleFrame(ctx, pid, []byte(`{"name":"normalize_records","input":{"records":[]}}`)); codeOf(err) != "unknown_tool" {
		t.Fatalf("removed tool still callable: %v", err)
	}
	if len(notified) != 2 {
		t.Fatalf("notified %v", notified)
	}
}
