package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// nameVariants are spellings of a tool name and whether they name it. The rule, from the
// protocol-diagnostics Skill: "The function name is trimmed of surrounding white space
// before lookup" — ASCII white space (tab, line feed, form feed, carriage return, space),
// and nothing else: every other spelling is not the exact name and is refused.
func nameVariants(name string) []struct {
	label, name string
	names       bool
} {
	return []struct {
		label, name string
		names       bool
	}{
		{"exact", name, true},
		{"ASCII spaces around", " \t" + name + "\r\n ", true},
		{"form feed", "\f" + name, true},
		{"no-break space", name + "\u00a0", false},
		{"ideographic space", "\u3000" + name, false},
		{"line separator", name + "\u2028", false},
		{"paragraph separator", "\u2029" + name, false},
		{"next line", name + "\u0085", false},
		{"vertical tab", "\u000b" + name, false},
		{"zero-width space", name + "\u200b", false},
		{"byte order mark", "\ufeff" + name, false},
		{"ogham space", "\u1680" + name, false},
		{"NUL", name + "\x00", false},
		{"title case", string(name[0]-32) + name[1:], false},
		{"upper case", upper(name), false},
		{"inner space", name[:1] + " " + name[1:], false},
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestToolNameConfusion: one rule for every path a tool name takes — a model frame, the
// legacy action fallback, run_jit_tool's tool_name, the host API and a tools.call syscall.
// A spelling that is not the name is an unknown tool on every path, and nothing runs.
func TestToolNameConfusion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, engine.Config{})
	direct := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Projection: engine.Direct})
	mux := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Projection: engine.Multiplexed})
	var runs atomic.Int64
	installJIT(t, e, mux, &runs)

	type path struct {
		name string
		tool string
		call func(name string) error
	}
	paths := []path{
		{"model frame", "echo", func(n string) error {
			_, err := e.k.HandleFrame(ctx, direct, []byte(`{"name":`+jsonStr(n)+`,"arguments":{}}`))
			return err
		}},
		{"action fallback", "echo", func(n string) error {
			_, err := e.k.HandleFrame(ctx, direct, []byte(`{"name":"","arguments":{"action":`+jsonStr(n)+`}}`))
			return err
		}},
		{"run_jit_tool tool_name", "normalize_records", func(n string) error {
			_, err := e.k.HandleFrame(ctx, mux, []byte(`{"name":"run_jit_tool","arguments":{"tool_name":`+jsonStr(n)+`,"arguments":{"records":[]}}}`))
			return err
		}},
		{"host API", "echo", func(n string) error {
			_, err := e.k.Runtime().Tools.Call(ctx, direct, n, nil)
			return err
		}},
		{"tools.call syscall", "normalize_records", func(n string) error {
			_, err := e.k.Runtime().Tools.CallTool(ctx, mux, n, []byte(`{"records":[]}`), 1)
			return err
		}},
	}
	for _, p := range paths {
		for _, v := range nameVariants(p.tool) {
			before := runs.Load()
			err := p.call(v.name)
			switch {
			case v.names && err != nil:
				t.Errorf("%s, %s %q: %v, want the tool to run", p.name, v.label, v.name, err)
			case !v.names && codeOf(err) != "unknown_tool":
				t.Errorf("%s, %s %q: got %s, want unknown_tool", p.name, v.label, v.name, codeOf(err))
			case !v.names && runs.Load() != before:
				t.Errorf("%s, %s %q: the tool ran", p.name, v.label, v.name)
			}
		}
	}
}

// TestInstallToolRefusesCaseFoldedNames: registration refuses "a name equal to a process
// tool's name or another JIT tool's under Unicode case folding" (Echo and ECHO beside echo,
// Normalize_Records beside normalize_records), so no two tools of a process differ only in case.
func TestInstallToolRefusesCaseFoldedNames(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	var runs atomic.Int64
	installJIT(t, e, pid, &runs)
	for _, name := range []string{"Echo", "ECHO", "eCHO", "Normalize_Records", "NORMALIZE_RECORDS"} {
		tool := jitTool(&runs)
		tool.Name, tool.ID = name, "tool_22222222222222222222222222222222"
		if err := e.k.InstallTool(context.Background(), pid, tool, nil); codeOf(err) != "tool_conflict" {
			t.Errorf("install %q: got %v, want tool_conflict", name, err)
		}
	}
	info, err := e.k.Process(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Tools) != 2 {
		t.Fatalf("tools after the refusals: %v", info.Tools)
	}
}
