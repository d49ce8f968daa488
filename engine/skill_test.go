package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
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

// TestSkillGate: with the image option skill_gate: strict, "while Skills are active, a
// model call to a tool outside the image's base tools and the active Skills'
// allowed-tools is refused at dispatch (typed error, audited)", durable across a reopen.
func TestSkillGate(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	def, _ := tools.DefaultImage()
	def.SkillGate = image.SkillGateStrict
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
		if got := toolNames(t, w.k, pid); !slices.Equal(got, []string{tools.SkillName, tools.DeactivateSkillName, "echo"}) {
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
	// The model can leave a Skill itself, even under the strict gate.
	w.mustCall(t, pid, tools.SkillName, `{"name":"protocol-diagnostics"}`)
	if _, err := w.call(pid, tools.ProposeName, doubler("third")); !errors.Is(err, engine.ErrNotAllowed) {
		t.Fatalf("strict gate: %v", err)
	}
	left := w.mustCall(t, pid, tools.DeactivateSkillName, `{"name":"protocol-diagnostics"}`)
	if got := toStrings(left["active_skills"]); len(got) != 0 {
		t.Fatalf("still active: %v", got)
	}
	if ev := lastOf(t, w.events(t, pid), engine.EventSkillDeactivated); field(t, ev, "skill") != "protocol-diagnostics" || field(t, ev, "by") != "model" {
		t.Fatalf("the deactivation is not audited: %s", ev.Data)
	}
	if _, err := w.call(pid, tools.ProposeName, doubler("third")); err != nil {
		t.Fatalf("after deactivate_skill: %v", err)
	}
	if _, err := w.call(pid, tools.DeactivateSkillName, `{"name":"protocol-diagnostics"}`); !errors.Is(err, engine.ErrInvalidState) {
		t.Fatalf("deactivating an inactive Skill: %v", err)
	}
}

// TestSkillsTakeNoToolAway: in the Agent Skills convention allowed-tools names the tools
// a Skill's workflow uses, not the only tools a process may call. The protocol-
// diagnostics Skill's own workflow — "Call echo once…", then "call the real target tool
// with a small schema-valid, safe case", then "invoke the real registered tool … with a
// small valid case and then with a deliberately schema-invalid case that must be
// rejected before execution" — runs whole through the default image with only that
// Skill active (allowed-tools: echo).
func TestSkillsTakeNoToolAway(t *testing.T) {
	for _, proj := range []engine.Projection{engine.Direct, engine.Multiplexed} {
		t.Run(string(proj), func(t *testing.T) {
			w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
			def, _ := tools.DefaultImage()
			def.Projection = proj
			pid := w.spawnImage(t, def)
			if instr, _ := w.k.Instructions(pid); strings.Contains(instr, "only its allowed tools") {
				t.Fatalf("the instructions still say a Skill takes tools away:\n%s", instr)
			}
			before := toolNames(t, w.k, pid)
			act := w.mustCall(t, pid, tools.SkillName, `{"name":"protocol-diagnostics"}`)
			if !slices.Equal(toStrings(act["allowed_tools"]), []string{"echo"}) {
				t.Fatalf("activation = %v", act)
			}
			if got := toolNames(t, w.k, pid); !slices.Equal(got, before) {
				t.Fatalf("activating a Skill changed the tool list: %v -> %v", before, got)
			}
			// 2. echo.
			if got := w.mustCall(t, pid, "echo", `{"nested":{"action":"keep"},"n":9007199254740993}`); got == nil {
				t.Fatal("echo")
			}
			// 4. The real target tool: here the JIT lifecycle, then the tool it registers.
			w.register(t, pid, doubler("double"))
			call := func(args string) (map[string]any, error) {
				if proj == engine.Multiplexed {
					out, err := w.call(pid, engine.RunJITTool, `{"tool_name":"double","arguments":`+args+`}`)
					if err != nil {
						return nil, err
					}
					var m map[string]any
					json.Unmarshal(out, &m)
					return m, nil
				}
				out, err := w.call(pid, "double", args)
				if err != nil {
					return nil, err
				}
				var m map[string]any
				json.Unmarshal(out, &m)
				return m, nil
			}
			if got, err := call(`{"n":21}`); err != nil || got["n"] != float64(42) {
				t.Fatalf("valid case: %v %v", got, err)
			}
			if _, err := call(`{"n":"21"}`); !errors.Is(err, engine.ErrSchemaInvalid) {
				t.Fatalf("schema-invalid case: %v, want schema_invalid before execution", err)
			}
			if info, _ := w.k.Process(pid); !slices.Equal(info.ActiveSkills, []string{"protocol-diagnostics"}) {
				t.Fatalf("active Skills %v", info.ActiveSkills)
			}
			// The model can leave the Skill.
			w.mustCall(t, pid, tools.DeactivateSkillName, `{"name":"protocol-diagnostics"}`)
			if info, _ := w.k.Process(pid); len(info.ActiveSkills) != 0 {
				t.Fatalf("active Skills after deactivate_skill: %v", info.ActiveSkills)
			}
		})
	}
}

// TestSkillGateMultiplexed: "In multiplexed mode no JIT names or schemas appear in any
// Skill text or catalog the model receives", and run_jit_tool is gated like the JIT
// tool it routes to.
func TestSkillGateMultiplexed(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	def, _ := tools.DefaultImage()
	def.Projection = engine.Multiplexed
	def.SkillGate = image.SkillGateStrict
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
