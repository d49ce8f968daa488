package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

func echoKernel(t *testing.T, lim engine.Limits) (*engine.Kernel, *store.Store, string) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tools.Echo()}, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(); st.Close() })
	pid, err := k.Spawn(context.Background(), engine.ProcessConfig{Tools: []string{tools.EchoName}})
	if err != nil {
		t.Fatal(err)
	}
	return k, st, pid
}

// TestEchoContract checks the protocol-diagnostics Skill's tool guide: "Input is a top-level JSON object.
// The schema permits extra fields and performs no field-specific semantic
// validation." and "Echo performs no permission grant ...": read-only, no capability.
func TestEchoContract(t *testing.T) {
	e := tools.Echo()
	if e.Name != "echo" || e.Kind != engine.KindBuiltin || !e.Annotations.ReadOnly || e.Annotations.Destructive || e.Annotations.OpenWorld {
		t.Fatalf("echo is not a read-only, closed-world built-in: %+v", e.Annotations)
	}
	var in map[string]any
	if err := json.Unmarshal(e.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in["type"] != "object" || in["additionalProperties"] != true || in["properties"] != nil || in["required"] != nil {
		t.Fatalf("echo's input schema must be a top-level object permitting any field: %s", e.InputSchema)
	}
	k, _, pid := echoKernel(t, engine.Limits{})
	ctx := context.Background()
	for _, args := range []string{`{}`, `{"anything":[{"at":{"all":null}}],"x":1e3}`} {
		r, err := k.Runtime().Tools.Call(ctx, pid, "echo", json.RawMessage(args))
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if r.Text != string(r.Structured) {
			t.Fatalf("text and structured forms differ: %q vs %s", r.Text, r.Structured)
		}
	}
	// "a top-level JSON object": anything else never reaches echo.
	for _, args := range []string{`[1]`, `"s"`, `3`, `true`} {
		if _, err := k.Runtime().Tools.Call(ctx, pid, "echo", json.RawMessage(args)); liberr.CodeOf(err) != "protocol_frame" {
			t.Fatalf("%s reached echo: %v", args, err)
		}
	}
}

// TestEchoLimits: "Global argument and normalized-result persistence limits apply".
func TestEchoLimits(t *testing.T) {
	k, st, pid := echoKernel(t, engine.Limits{MaxArgumentBytes: 128, MaxResultBytes: 32})
	ctx := context.Background()
	_, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo","input":{"s":"`+strings.Repeat("a", 200)+`"}}`))
	if liberr.CodeOf(err) != "limit_exceeded" {
		t.Fatalf("oversized argument: %v", err)
	}
	_, err = k.HandleFrame(ctx, pid, []byte(`{"name":"echo","input":{"s":"`+strings.Repeat("a", 60)+`"}}`))
	if liberr.CodeOf(err) != "limit_exceeded" {
		t.Fatalf("oversized result: %v", err)
	}
	evs, _ := st.Events(pid, 0, 0)
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	// The oversized argument never reached tool_called; the oversized result did,
	// and failed without a persisted ToolResult.
	if strings.Join(got, ",") != "process_spawned,call_rejected,tool_called,tool_failed" {
		t.Fatalf("events %v", got)
	}
	if _, err := st.ToolResult(pid, evs[2].CallID); err == nil {
		t.Fatal("an oversized echo result was persisted")
	}
	r, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo","input":{"ok":true}}`))
	if err != nil || string(r.Structured) != `{"ok":true}` {
		t.Fatalf("small sentinel: %v", err)
	}
}
