package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// TestSkillTool: "a built-in tool activates a Skill and returns its instructions";
// the project's own Skills ship with the default image and load.
func TestSkillTool(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	img, err := image.ParseImage([]byte(`{"format":"libos.image/v1","name":"skills","version":"1.0.0",
		"tools":["echo","activate_skill"],"skills":["protocol-diagnostics"]}`), tools.SkillFS())
	if err != nil {
		t.Fatal(err)
	}
	pid, err := k.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	call := func(args string) (map[string]any, error) {
		frame, _ := json.Marshal(map[string]any{"name": tools.SkillName, "arguments": args})
		res, err := k.HandleFrame(ctx, pid, frame)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(res.Structured, &m)
	}
	doc, _ := fs.ReadFile(tools.SkillFS(), "protocol-diagnostics/SKILL.md")
	want, _ := image.ParseSkill(doc)
	got, err := call(`{"name":"protocol-diagnostics"}`)
	if err != nil || got["instructions"] != want.Instructions || got["name"] != "protocol-diagnostics" || got["description"] != want.Description {
		t.Fatalf("activation = %v, %v", got, err)
	}
	for _, tc := range []struct{ rule, args, code string }{
		{"the Skill must be one the image ships", `{"name":"jit-authoring"}`, "unknown_skill"},
		{"the arguments are exactly {name}", `{"name":"protocol-diagnostics","force":true}`, "schema_invalid"},
		{"name is required", `{}`, "schema_invalid"},
	} {
		_, err := call(tc.args)
		var e *engine.Error
		if !errors.As(err, &e) || string(e.Code) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.rule, err, tc.code)
		}
	}
	evs, _ := st.Events(pid, 0, 0)
	n := 0
	for _, e := range evs {
		if e.Type == engine.EventSkillActivated {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d skill_activated events, want 1", n)
	}
}

// TestProjectSkills: the project's Skills name only tools of the default image and
// never run_jit_tool in allowed-tools.
func TestProjectSkills(t *testing.T) {
	img, err := tools.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range img.Skills {
		if len(s.AllowedTools) == 0 || strings.TrimSpace(s.Instructions) == "" {
			t.Errorf("Skill %s: %+v", s.Name, s)
		}
	}
}
