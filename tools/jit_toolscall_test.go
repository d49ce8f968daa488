package tools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// openCandidate is a proposal of source with open-enough schemas and no tests, so
// that registration validates only the static checks.
func openCandidate(t *testing.T, name, source, output string) string {
	t.Helper()
	obj := candidateJSON(t, "good_clock_now.json")
	obj = withField(t, obj, "name", jsonString(name))
	obj = withField(t, obj, "source_code", jsonString(source))
	obj = withField(t, obj, "input_schema", `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`)
	obj = withField(t, obj, "output_schema", output)
	return withField(t, obj, "tests", `[]`)
}

// openCalls returns the call IDs of tool_called events without a settlement.
func openCalls(t *testing.T, evs []store.Event) map[string]string {
	t.Helper()
	open := map[string]string{}
	for _, e := range evs {
		d := data(t, e)
		id, _ := d["call_id"].(string)
		switch e.Type {
		case engine.EventToolCalled:
			open[id], _ = d["tool"].(string)
		case engine.EventToolResult, engine.EventToolFailed:
			delete(open, id)
		}
	}
	return open
}

// TestToolsCallThroughThePipeline: "tools.call {tool, arguments} → result:
// capability tools:call; calls another tool of the same process through the engine's
// full pipeline … with a depth bound so a tool cannot recurse forever." Here with the
// real engine, router and sandbox, not a stand-in ToolCaller.
func TestToolsCallThroughThePipeline(t *testing.T) {
	w := newWorld(t)
	const callsEcho = `export async function run(args: { n: number }, libos: any) {
  return await libos.syscall("tools.call", { tool: "echo", arguments: { n: args.n, action: "dropped", nested: { action: "kept" } } });
}`
	const recurses = `export async function run(args: { n: number }, libos: any) {
  return await libos.syscall("tools.call", { tool: "recurse", arguments: { n: args.n + 1 } });
}`
	open := `{"type":"object"}`

	t.Run("the nested call goes through the pipeline: echo's own events, action removed", func(t *testing.T) {
		pid := w.spawn(t, engine.Direct, "tools:call")
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "via_echo", callsEcho, open))))
		before := w.events(t, pid)
		out, err := w.call(t, pid, "via_echo", `{"n":7}`)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != `{"n":7,"nested":{"action":"kept"}}` {
			t.Fatalf("tools.call echo returned %s", out)
		}
		after := w.events(t, pid)[len(before):]
		var nested map[string]any
		for _, e := range after {
			if d := data(t, e); e.Type == engine.EventToolCalled && d["tool"] == "echo" {
				nested = d
			}
		}
		if nested == nil || nested["depth"] != float64(1) {
			t.Fatalf("no tool_called event for the nested echo at depth 1: %v", nested)
		}
		if n := count(after, engine.EventToolResult); n != 2 {
			t.Fatalf("%d tool_result events, want 2 (echo and via_echo)", n)
		}
		if sc := last(t, after, syscalls.EventSyscall); sc["route"] != "tools.call" || sc["decision"] != "allowed" {
			t.Fatalf("the syscall is audited: %v", sc)
		}
	})

	t.Run("without tools:call the syscall is denied, typed and audited", func(t *testing.T) {
		pid := w.spawn(t, engine.Direct)
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "via_echo", callsEcho, open))))
		before := w.events(t, pid)
		_, err := w.call(t, pid, "via_echo", `{"n":1}`)
		if codeOf(err) != syscalls.CodeCapabilityDenied {
			t.Fatalf("got %v, want capability_denied", err)
		}
		after := w.events(t, pid)[len(before):]
		if sc := last(t, after, syscalls.EventSyscall); sc["decision"] != "denied" || sc["code"] != syscalls.CodeCapabilityDenied {
			t.Fatalf("the denial is audited: %v", sc)
		}
		for _, e := range after {
			if d := data(t, e); e.Type == engine.EventToolCalled && d["tool"] == "echo" {
				t.Fatal("echo ran although the capability was missing")
			}
		}
	})

	t.Run("a tool that calls itself stops at the depth bound, typed; every call is settled", func(t *testing.T) {
		pid := w.spawn(t, engine.Direct, "tools:call")
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "recurse", recurses, open))))
		_, err := w.call(t, pid, "recurse", `{"n":0}`)
		if codeOf(err) != string(syscalls.CodeLimitExceeded) {
			t.Fatalf("got %v (%s), want limit_exceeded", err, codeOf(err))
		}
		evs := w.events(t, pid)
		if o := openCalls(t, evs); len(o) != 0 {
			t.Fatalf("unsettled calls after the recursion stopped: %v", o)
		}
		n := 0
		for _, e := range evs {
			if d := data(t, e); e.Type == engine.EventToolCalled && d["tool"] == "recurse" {
				n++
			}
		}
		// The model's call at depth 0, then one nested call per level up to the bound.
		if n != syscalls.DefaultMaxToolDepth+1 {
			t.Fatalf("%d calls of recurse ran; want %d (depth 0 to the bound %d)", n, syscalls.DefaultMaxToolDepth+1, syscalls.DefaultMaxToolDepth)
		}
		// The host survived: the next call in the process runs.
		if _, err := w.call(t, pid, tools.EchoName, `{"after":true}`); err != nil {
			t.Fatalf("echo after the recursion: %v", err)
		}
	})

	// "run_jit_tool is never a process tool: it is never installed in the tool table,
	// cannot be called through the host API". The envelope names a JIT tool that is
	// registered in the process and that tools.call reaches by its own name, so the
	// refusal can only come from run_jit_tool itself.
	t.Run("tools.call never reaches run_jit_tool", func(t *testing.T) {
		const target = `export async function run(args: { n: number }, libos: any) {
  return { n: args.n };
}`
		const viaName = `export async function run(args: { n: number }, libos: any) {
  return await libos.syscall("tools.call", { tool: "target", arguments: { n: args.n } });
}`
		const viaMux = `export async function run(args: { n: number }, libos: any) {
  return await libos.syscall("tools.call", { tool: "run_jit_tool", arguments: { tool_name: "target", arguments: { n: args.n } } });
}`
		pid := w.spawn(t, engine.Multiplexed, "tools:call")
		for name, src := range map[string]string{"target": target, "via_name": viaName, "via_mux": viaMux} {
			w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, name, src, open))))
		}
		// The control: the same nested call by the tool's own name runs it.
		out, err := w.call(t, pid, engine.RunJITTool, `{"tool_name":"via_name","arguments":{"n":1}}`)
		if err != nil || string(out) != `{"n":1}` {
			t.Fatalf("tools.call of the registered target: %s, %v", out, err)
		}
		before := w.events(t, pid)
		_, err = w.call(t, pid, engine.RunJITTool, `{"tool_name":"via_mux","arguments":{"n":1}}`)
		// The route's argument schema refuses the name before any tool is looked up.
		if codeOf(err) != syscalls.CodeArgumentInvalid || !strings.Contains(err.Error(), "at /tool") {
			t.Fatalf("tools.call of run_jit_tool: %v (%s), want argument_invalid at /tool", err, codeOf(err))
		}
		var te interface{ ErrorCode() string }
		if !errors.As(err, &te) {
			t.Fatalf("untyped error %v", err)
		}
		for _, e := range w.events(t, pid)[len(before):] {
			if d := data(t, e); e.Type == engine.EventToolCalled && d["tool"] == "target" {
				t.Fatal("run_jit_tool through tools.call ran the target tool")
			}
		}
	})
}

// TestRegisterResultIsExact: register_jit_tool "returns exactly {tool_id, name,
// scope}", and the binding it persists carries the same identity.
func TestRegisterResultIsExact(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "clock:now")
	id := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	out, err := w.call(t, pid, tools.RegisterName, idArg(id))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil || len(m) != 3 || m["tool_id"] == nil || m["name"] == nil || m["scope"] == nil {
		t.Fatalf("register returned %s; want exactly {tool_id, name, scope}", out)
	}
	var r struct{ ToolID, Name, Scope string }
	r.ToolID, r.Name, r.Scope = unquote(t, m["tool_id"]), unquote(t, m["name"]), unquote(t, m["scope"])
	b, err := w.st.Binding(pid, "clock_now")
	if err != nil || b.ToolID != r.ToolID || r.Scope != "ephemeral_process" || b.Scope != r.Scope || b.CandidateID != id || !toolRE.MatchString(r.ToolID) {
		t.Fatalf("binding %+v (%v) does not match the answer %+v", b, err, r)
	}
}

func unquote(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string", raw)
	}
	return s
}
