package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

type codedErr struct{ code string }

func (e codedErr) Error() string     { return "denied by policy" }
func (e codedErr) ErrorCode() string { return e.code }

func builtin(name, in, out string, h engine.Handler) engine.Tool {
	t := engine.Tool{Name: name, Description: name + " test tool", InputSchema: json.RawMessage(in), Handler: h}
	if out != "" {
		t.OutputSchema = json.RawMessage(out)
	}
	return t
}

func returns(s string) engine.Handler {
	return func(context.Context, *engine.Call) (json.RawMessage, error) { return json.RawMessage(s), nil }
}

const strictIn = `{"type":"object","properties":{"n":{"type":"integer","maximum":10}},"required":["n"],"additionalProperties":false}`

// TestPipelineOrder checks DESIGN.md's pipeline "adapter → projection/lookup →
// argument size limit → input-schema validation → visibility/Skill gate → budget →
// tool_called event (durable) → handler → result size limit → output-schema
// validation → result normalisation → ToolResult persisted → tool_result event" by the
// events each kind of failure leaves behind.
func TestPipelineOrder(t *testing.T) {
	var ran atomic.Int64
	counting := func(h engine.Handler) engine.Handler {
		return func(ctx context.Context, c *engine.Call) (json.RawMessage, error) {
			ran.Add(1)
			return h(ctx, c)
		}
	}
	builtins := []engine.Tool{
		tools.Echo(),
		builtin("strict", strictIn, "", counting(returns(`{"ok":true}`))),
		builtin("fails", `{"type":"object"}`, "", counting(func(context.Context, *engine.Call) (json.RawMessage, error) {
			return nil, errors.New("disk on fire")
		})),
		builtin("denied", `{"type":"object"}`, "", counting(func(context.Context, *engine.Call) (json.RawMessage, error) {
			return nil, codedErr{"capability_denied"}
		})),
		builtin("panics", `{"type":"object"}`, "", counting(func(context.Context, *engine.Call) (json.RawMessage, error) {
			panic("boom")
		})),
		builtin("garbage", `{"type":"object"}`, "", counting(returns(`{"a":1,"a":2}`))),
		builtin("nothing", `{"type":"object"}`, "", counting(returns(""))),
		builtin("badout", `{"type":"object"}`, `{"type":"object","required":["id"]}`, counting(returns(`{"name":"x"}`))),
		builtin("hidden", `{"type":"object"}`, "", counting(returns(`{}`))),
	}
	all := []string{"echo", "strict", "fails", "denied", "panics", "garbage", "nothing", "badout", "hidden"}
	e := newEnv(t, engine.Config{Builtins: builtins, Limits: engine.Limits{MaxArgumentBytes: 256, MaxResultBytes: 64}})

	big := `{"name":"echo","input":{"pad":"` + strings.Repeat("x", 300) + `"}}`
	mid := `{"name":"echo","input":{"pad":"` + strings.Repeat("x", 100) + `"}}`
	cases := []struct {
		name, rule string
		limits     engine.Limits
		pre        []string // frames sent first (must succeed)
		frame      string
		code       string
		events     string // event types after process_spawned and pre
		ran        bool
		result     bool // a ToolResult is persisted
	}{
		{"success", "Successful Echo calls still create normal audit/event/result evidence",
			engine.Limits{}, nil, `{"name":"echo","input":{"a":1}}`, "", "tool_called,tool_result", false, true},
		{"malformed-frame", "malformed JSON ... rejected here, before any tool runs, as a protocol-frame failure (recorded as such in the audit log, never as a tool failure)",
			engine.Limits{}, nil, `{"name":"echo","arguments":"{"}`, "protocol_frame", "protocol_rejected", false, false},
		{"no-name", "Missing/empty function name without a fallback ... fail(s) in protocol normalization before Echo execution",
			engine.Limits{}, nil, `{"arguments":{}}`, "protocol_frame", "protocol_rejected", false, false},
		{"oversized-frame", "An oversized argument is rejected before the normal tool-called event (a frame too large to be an argument is refused before it is parsed)",
			engine.Limits{}, nil, `{"name":"echo","input":{"pad":"` + strings.Repeat("x", 6*256+4096) + `"}}`, "limit_exceeded", "protocol_rejected", false, false},
		{"unknown-tool", "Unknown or hidden tool names are projection or process-tool-table failures",
			engine.Limits{}, nil, `{"name":"nope","arguments":{}}`, "unknown_tool", "call_rejected", false, false},
		{"not-enabled", "Unknown or hidden tool names are projection or process-tool-table failures (a built-in the process did not enable)",
			engine.Limits{}, nil, `{"name":"hidden","arguments":{}}`, "unknown_tool", "call_rejected", false, false},
		{"oversized-argument", "An oversized argument is rejected before the normal tool-called event.",
			engine.Limits{}, nil, big, "limit_exceeded", "call_rejected", false, false},
		{"oversized-argument-process-limit", "An oversized argument is rejected before the normal tool-called event (a process limit tightens the kernel's)",
			engine.Limits{MaxArgumentBytes: 50}, nil, mid, "limit_exceeded", "call_rejected", false, false},
		{"schema-invalid", "input-schema validation (rejects before execution)",
			engine.Limits{}, nil, `{"name":"strict","arguments":{"n":11}}`, "schema_invalid", "call_rejected", false, false},
		{"schema-extra-field", "input-schema validation (rejects before execution)",
			engine.Limits{}, nil, `{"name":"strict","arguments":{"n":1,"m":2}}`, "schema_invalid", "call_rejected", false, false},
		{"budget", "budget → tool_called: a call over the budget never reaches tool_called",
			engine.Limits{MaxCalls: 1}, []string{`{"name":"echo"}`}, `{"name":"echo"}`, "budget_exceeded", "call_rejected", false, false},
		{"handler-error", "Failures after tool_called are settled with a tool_failed event carrying a typed code",
			engine.Limits{}, nil, `{"name":"fails"}`, "tool_failed", "tool_called,tool_failed", true, false},
		{"handler-coded-error", "Failures after tool_called are settled with a tool_failed event carrying a typed code (the handler's own)",
			engine.Limits{}, nil, `{"name":"denied"}`, "capability_denied", "tool_called,tool_failed", true, false},
		{"handler-panic", "the host survives every guest failure",
			engine.Limits{}, nil, `{"name":"panics"}`, "tool_failed", "tool_called,tool_failed", true, false},
		{"oversized-echo-result", "An oversized read-only Echo result fails without a persisted ToolResult.",
			engine.Limits{}, nil, mid, "limit_exceeded", "tool_called,tool_failed", false, false},
		{"result-not-exact-json", "only JSON crosses the boundary, decoded exactly",
			engine.Limits{}, nil, `{"name":"garbage"}`, "output_invalid", "tool_called,tool_failed", true, false},
		{"no-result", "a handler must return a value",
			engine.Limits{}, nil, `{"name":"nothing"}`, "output_invalid", "tool_called,tool_failed", true, false},
		{"output-schema", "output-schema validation → result normalisation → ToolResult persisted",
			engine.Limits{}, nil, `{"name":"badout"}`, "output_invalid", "tool_called,tool_failed", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enabled := all[:len(all)-1]
			pid := e.spawn(t, engine.ProcessConfig{Tools: enabled, Limits: c.limits})
			for _, f := range c.pre {
				if _, err := e.k.HandleFrame(context.Background(), pid, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			before := len(e.events(t, pid))
			ran.Store(0)
			r, err := e.k.HandleFrame(context.Background(), pid, []byte(c.frame))
			if got := codeOf(err); got != c.code {
				t.Fatalf("rule %q: code %q (%v), want %q", c.rule, got, err, c.code)
			}
			evs := e.events(t, pid)[before:]
			if got := strings.Join(types(evs), ","); got != c.events {
				t.Fatalf("rule %q: events %s, want %s", c.rule, got, c.events)
			}
			if (ran.Load() > 0) != c.ran {
				t.Fatalf("rule %q: handler ran %d times", c.rule, ran.Load())
			}
			if c.code != "" {
				last := evs[len(evs)-1]
				if got := field(t, last, "code"); got != c.code {
					t.Fatalf("rule %q: the %s event carries code %v, want %s", c.rule, last.Type, got, c.code)
				}
			}
			var callID string
			for _, ev := range evs {
				if ev.Type == engine.EventToolCalled {
					callID = ev.CallID
				}
			}
			if callID != "" {
				_, rerr := e.st.ToolResult(pid, callID)
				if persisted := rerr == nil; persisted != c.result {
					t.Fatalf("rule %q: ToolResult persisted = %v, want %v", c.rule, persisted, c.result)
				}
				if !c.result && !errors.Is(rerr, store.ErrNotFound) {
					t.Fatalf("unexpected store error %v", rerr)
				}
			}
			if c.result != (r != nil) {
				t.Fatalf("rule %q: result %v", c.rule, r)
			}
			if un, _ := e.st.Unsettled(pid); len(un) != 0 {
				t.Fatalf("rule %q: %d calls left unsettled", c.rule, len(un))
			}
		})
	}
}

// TestErrorsAreTyped: "Errors are typed values with stable machine codes ... testable
// with errors.Is/As".
func TestErrorsAreTyped(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	_, err := e.k.HandleFrame(context.Background(), pid, []byte(`[]`))
	if !errors.Is(err, engine.ErrProtocolFrame) || errors.Is(err, engine.ErrToolFailed) {
		t.Fatalf("%v is not (only) a protocol frame error", err)
	}
	if !strings.HasPrefix(err.Error(), "engine: ") {
		t.Fatalf("message %q lacks the package prefix", err)
	}
	_, err = e.k.HandleFrame(context.Background(), "pid_nope", []byte(`{"name":"echo"}`))
	if !errors.Is(err, engine.ErrUnknownProcess) {
		t.Fatalf("got %v", err)
	}
	_, err = e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"echo","arguments":{"action":"x","a":{"b":1,"b":2}}}`))
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Code != engine.CodeProtocolFrame {
		t.Fatalf("got %v", err)
	}
}

// TestSchemaDetails: schema violations are data (path + message), and the message
// names the tool.
func TestSchemaDetails(t *testing.T) {
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{builtin("strict", strictIn, "", returns(`{}`))}})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"strict"}})
	_, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"strict","input":{"n":"7"}}`))
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Code != engine.CodeSchemaInvalid || len(ee.Details) == 0 {
		t.Fatalf("got %v", err)
	}
	if ee.Details[0].Path != "/n" || !strings.Contains(err.Error(), "strict") {
		t.Fatalf("details %+v, message %q", ee.Details, err)
	}
}

// TestVisibilityGate: the gate comes after schema validation and before tool_called;
// a gated tool leaves the projected list.
func TestVisibilityGate(t *testing.T) {
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{tools.Echo(), builtin("strict", strictIn, "", returns(`{}`))}})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo", "strict"}})
	changed := 0
	defer e.k.OnToolsChanged(func(p string) {
		if p == pid {
			changed++
		}
	})()
	if err := e.k.SetToolGate(context.Background(), pid, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	defs, _ := e.k.Tools(pid)
	if len(defs) != 1 || defs[0].Name != "echo" || changed != 1 {
		t.Fatalf("projected %v, notified %d", defs, changed)
	}
	_, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"strict","input":{"n":"bad"}}`))
	if codeOf(err) != "schema_invalid" {
		t.Fatalf("schema validation must come before the gate: %v", err)
	}
	_, err = e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"strict","input":{"n":1}}`))
	if codeOf(err) != "tool_not_allowed" {
		t.Fatalf("got %v", err)
	}
	if err := e.k.SetToolGate(context.Background(), pid, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"strict","input":{"n":1}}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.k.SetToolGate(context.Background(), pid, []string{engine.RunJITTool}); codeOf(err) != "invalid_config" {
		t.Fatalf("run_jit_tool in a gate: %v", err)
	}
}

// TestSpawnConfig: a process configuration is checked whole at Spawn.
func TestSpawnConfig(t *testing.T) {
	e := newEnv(t, engine.Config{})
	for name, cfg := range map[string]engine.ProcessConfig{
		"unknown-builtin":  {Tools: []string{"nope"}},
		"run-jit-tool":     {Tools: []string{"echo", engine.RunJITTool}},
		"duplicate":        {Tools: []string{"echo", "echo"}},
		"bad-projection":   {Projection: "sideways"},
		"negative-limits":  {Limits: engine.Limits{MaxCalls: -1}},
		"negative-arg-max": {Limits: engine.Limits{MaxArgumentBytes: -5}},
	} {
		if _, err := e.k.Spawn(context.Background(), cfg); codeOf(err) != "invalid_config" {
			t.Errorf("%s: got %v, want invalid_config", name, err)
		}
	}
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Limits: engine.Limits{MaxArgumentBytes: 1 << 30}})
	info, err := e.k.Process(pid)
	if err != nil || info.Limits.MaxArgumentBytes != engine.DefaultMaxArgumentBytes || info.Projection != engine.Direct {
		t.Fatalf("a process limit cannot raise the kernel's: %+v %v", info, err)
	}
}

// TestOpenRejectsBadTools: tool definitions are compiled once, at Open, and refused
// whole.
func TestOpenRejectsBadTools(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, tool := range map[string]engine.Tool{
		"reserved-name":     builtin(engine.RunJITTool, `{"type":"object"}`, "", returns(`{}`)),
		"bad-name":          builtin("has space", `{"type":"object"}`, "", returns(`{}`)),
		"no-handler":        {Name: "x", InputSchema: json.RawMessage(`{"type":"object"}`)},
		"no-schema":         {Name: "x", Handler: returns(`{}`)},
		"root-not-object":   builtin("x", `{"type":"array"}`, "", returns(`{}`)),
		"schema-not-json":   builtin("x", `{"type":"object",}`, "", returns(`{}`)),
		"schema-dup-key":    builtin("x", `{"type":"object","type":"array"}`, "", returns(`{}`)),
		"schema-bad":        builtin("x", `{"type":"object","minProperties":"many"}`, "", returns(`{}`)),
		"remote-ref":        builtin("x", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "", returns(`{}`)),
		"file-ref":          builtin("x", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "", returns(`{}`)),
		"bad-output-schema": builtin("x", `{"type":"object"}`, `{"type":17}`, returns(`{}`)),
		"jit-kind":          {Name: "x", Kind: engine.KindJIT, InputSchema: json.RawMessage(`{"type":"object"}`), Handler: returns(`{}`)},
	} {
		_, err := engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tool}})
		if codeOf(err) != "invalid_tool" {
			t.Errorf("%s: got %v, want invalid_tool", name, err)
		}
	}
	_, err = engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tools.Echo(), tools.Echo()}})
	if codeOf(err) != "invalid_tool" {
		t.Errorf("duplicate built-ins: %v", err)
	}
}
