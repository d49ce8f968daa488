package engine_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// TestRenderTools: "The projection also renders tool definitions for providers: MCP
// Tool objects, OpenAI function definitions (strict-mode subset), Anthropic tool
// definitions."
func TestRenderTools(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	var runs atomic.Int64
	installJIT(t, e, pid, &runs)
	defs, err := e.k.Tools(pid)
	if err != nil {
		t.Fatal(err)
	}
	echoDesc, _ := json.Marshal(defs[0].Description)
	jitDesc := `"Normalize bounded record labels and return counts."`
	echoSchema := `{"additionalProperties":true,"type":"object"}`
	jitSchema := `{"additionalProperties":false,"properties":{"records":{"maxItems":3,"type":"array"}},"required":["records"],"type":"object"}`
	want := map[engine.Provider]string{
		engine.ProviderMCP: `[{"name":"echo","description":` + string(echoDesc) + `,"inputSchema":` + echoSchema + `,"outputSchema":` + echoSchema +
			`,"annotations":{"title":"Echo","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}},` +
			`{"name":"normalize_records","description":` + jitDesc + `,"inputSchema":` + jitSchema + `,"outputSchema":{"additionalProperties":false,"properties":{"count":{"type":"integer"}},"required":["count"],"type":"object"}` +
			`,"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false}}]`,
		// echo's open schema is outside the strict subset; the closed JIT schema is inside.
		engine.ProviderOpenAI: `[{"type":"function","function":{"name":"echo","description":` + string(echoDesc) + `,"parameters":` + echoSchema + `}},` +
			`{"type":"function","function":{"name":"normalize_records","description":` + jitDesc + `,"parameters":` + jitSchema + `,"strict":true}}]`,
		engine.ProviderAnthropic: `[{"name":"echo","description":` + string(echoDesc) + `,"input_schema":` + echoSchema + `},` +
			`{"name":"normalize_records","description":` + jitDesc + `,"input_schema":` + jitSchema + `}]`,
	}
	for p, w := range want {
		got, err := engine.RenderTools(defs, p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != w {
			t.Errorf("%s:\ngot  %s\nwant %s", p, got, w)
		}
	}
	if _, err := engine.RenderTools(defs, "gemini"); codeOf(err) != "invalid_config" {
		t.Fatalf("unknown provider: %v", err)
	}
}

// TestStrictSubset: strict:true only when the schema fits OpenAI strict mode.
func TestStrictSubset(t *testing.T) {
	cases := []struct {
		name, schema string
		strict       bool
	}{
		{"closed-all-required", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true},
		{"nullable-union", `{"type":"object","properties":{"a":{"type":["string","null"]}},"required":["a"],"additionalProperties":false}`, true},
		{"nested-closed", `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"required":["o"],"additionalProperties":false}`, true},
		{"empty-closed", `{"type":"object","properties":{},"additionalProperties":false}`, true},
		{"optional-property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{"open-object", `{"type":"object"}`, false},
		{"nested-open", `{"type":"object","properties":{"o":{"type":"object"}},"required":["o"],"additionalProperties":false}`, false},
		{"unsupported-keyword", `{"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}},"required":["a"],"additionalProperties":false}`, false},
		{"array-items-open", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object"}}},"required":["l"],"additionalProperties":false}`, false},
	}
	for _, c := range cases {
		e := newEnv(t, engine.Config{Builtins: []engine.Tool{builtin("t", c.schema, "", returns(`{}`))}})
		pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"t"}})
		defs, _ := e.k.Tools(pid)
		if defs[0].Strict != c.strict {
			t.Errorf("%s: strict = %v, want %v", c.name, defs[0].Strict, c.strict)
		}
	}
}
