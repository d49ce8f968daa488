package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

func toolNames(t testing.TB, k *engine.Kernel, pid string) []string {
	t.Helper()
	defs, err := k.Tools(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

// TestSkillGate: "While Skills are active, a model call to a tool outside the image's
// base tools and the active Skills' allowed-tools is refused at dispatch (typed error,
// audited) — allowed-tools is a hard limit, not a hint", durable across a reopen.
func TestSkillGate(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	def, _ := tools.DefaultImage()
	pid := w.spawnImage(t, def)
	w.register(t, pid, doubler("double"))

	// "The model sees the Skill catalog (name + description)".
	instr, _ := w.k.Instructions(pid)
	for _, s := range def.Skills {
		if !strings.Contains(instr, "- "+s.Name+": "+s.Description) {
			t.Fatalf("the catalog entry of %s is not in the instructions:\n%s", s.Name, instr)
		}
	}
	// "A built-in tool activates a Skill and returns its instructions."
	act := w.mustCall(t, pid, tools.SkillName, `{"name":"protocol-diagnostics"}`)
	if !strings.HasPrefix(act["instructions"].(string), "# Protocol diagnostics with echo") ||
		!slices.Equal(toStrings(act["allowed_tools"]), []string{"echo"}) || !slices.Equal(toStrings(act["active_skills"]), []string{"protocol-diagnostics"}) {
		t.Fatalf("activation = %v", act)
	}
	check := func(when string) {
		t.Helper()
		if _, err := w.call(pid, "echo", `{"x":1}`); err != nil {
			t.Fatalf("%s: echo is allowed by the active Skill: %v", when, err)
		}
		for name, args := range map[string]string{tools.ProposeName: doubler("other"), "double": `{"n":1}`} {
			_, err := w.call(pid, name, args)
			if !errors.Is(err, engine.ErrNotAllowed) || !strings.Contains(err.Error(), "protocol-diagnostics") {
				t.Fatalf("%s: %s outside allowed-tools: %v, want tool_not_allowed", when, name, err)
			}
			rej := lastOf(t, w.events(t, pid), engine.EventCallRejected)
			if field(t, rej, "tool") != name || field(t, rej, "code") != "tool_not_allowed" {
				t.Fatalf("%s: the refusal is not audited: %s", when, rej.Data)
			}
		}
		if got := toolNames(t, w.k, pid); !slices.Equal(got, []string{tools.SkillName, "echo"}) {
			t.Fatalf("%s: projected tools %v", when, got)
		}
	}
	check("active")
	w.reopen(t)
	check("after reopen")
	if info, _ := w.k.Process(pid); !slices.Equal(info.ActiveSkills, []string{"protocol-diagnostics"}) {
		t.Fatalf("active Skills after reopen: %v", info.ActiveSkills)
	}
	// The host is not the model: runtime.tools.call is not gated by Skills.
	if _, err := w.k.Runtime().Tools.Call(context.Background(), pid, "double", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatalf("host call: %v", err)
	}

	// Activating jit-authoring adds its allowed-tools; a Skill that allows
	// register_jit_tool lets the JIT tools it registers through.
	act = w.mustCall(t, pid, tools.SkillName, `{"name":"jit-authoring"}`)
	if !slices.Equal(toStrings(act["jit_tools"]), []string{"double"}) {
		t.Fatalf("direct-projection activation lists JIT tools %v", act["jit_tools"])
	}
	if got := w.mustCall(t, pid, "double", `{"n":2}`); got["n"] != float64(4) {
		t.Fatalf("double with jit-authoring active: %v", got)
	}
	if _, err := w.call(pid, tools.SkillName, `{"name":"no-such-skill"}`); !errors.Is(err, engine.ErrUnknownSkill) {
		t.Fatalf("unknown Skill: %v", err)
	}
	if err := w.k.DeactivateSkills(context.Background(), pid); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(pid, tools.ProposeName, doubler("other")); err != nil {
		t.Fatal("the gate stayed after the operator deactivated every Skill")
	}
}

// TestSkillGateMultiplexed: "In multiplexed mode no JIT names or schemas appear in any
// Skill text or catalog the model receives", and run_jit_tool is gated like the JIT
// tool it routes to.
func TestSkillGateMultiplexed(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	def, _ := tools.DefaultImage()
	def.Projection = engine.Multiplexed
	pid := w.spawnImage(t, def)
	const secret = "secret_tool_xyz"
	w.register(t, pid, doubler(secret))

	var seen []string
	instr, _ := w.k.Instructions(pid)
	seen = append(seen, instr)
	cat, _ := w.k.Skills(pid)
	b, _ := json.Marshal(cat)
	seen = append(seen, string(b))
	defs, _ := w.k.Tools(pid)
	rendered, _ := render.Tools(defs, render.MCP)
	seen = append(seen, string(rendered))
	for _, s := range []string{"protocol-diagnostics", "jit-authoring"} {
		out, err := w.call(pid, tools.SkillName, `{"name":"`+s+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, string(out))
	}
	for _, text := range seen {
		if strings.Contains(text, secret) || strings.Contains(text, `"maximum":1000`) {
			t.Fatalf("a JIT name or schema reached the model in multiplexed mode:\n%s", text)
		}
	}
	// With jit-authoring active the JIT tool passes, through run_jit_tool only.
	if got := w.mustCall(t, pid, engine.RunJITTool, `{"tool_name":"`+secret+`","arguments":{"n":1}}`); got["n"] != float64(2) {
		t.Fatalf("run_jit_tool: %v", got)
	}
	// With only protocol-diagnostics active (a fresh process), it is refused.
	other := w.spawnImage(t, def)
	w.register(t, other, doubler(secret))
	w.mustCall(t, other, tools.SkillName, `{"name":"protocol-diagnostics"}`)
	if _, err := w.call(other, engine.RunJITTool, `{"tool_name":"`+secret+`","arguments":{"n":1}}`); !errors.Is(err, engine.ErrNotAllowed) {
		t.Fatalf("run_jit_tool outside allowed-tools: %v", err)
	}
}

func toStrings(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
