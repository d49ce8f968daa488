package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
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
	want := map[render.Provider]string{
		render.MCP: `[{"name":"echo","description":` + string(echoDesc) + `,"inputSchema":` + echoSchema + `,"outputSchema":` + echoSchema +
			`,"annotations":{"title":"Echo","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}},` +
			`{"name":"normalize_records","description":` + jitDesc + `,"inputSchema":` + jitSchema + `,"outputSchema":{"additionalProperties":false,"properties":{"count":{"type":"integer"}},"required":["count"],"type":"object"}` +
			`,"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false}}]`,
		// echo's open schema is outside the strict subset; the closed JIT schema is inside.
		render.OpenAI: `[{"type":"function","function":{"name":"echo","description":` + string(echoDesc) + `,"parameters":` + echoSchema + `}},` +
			`{"type":"function","function":{"name":"normalize_records","description":` + jitDesc + `,"parameters":` + jitSchema + `,"strict":true}}]`,
		render.Anthropic: `[{"name":"echo","description":` + string(echoDesc) + `,"input_schema":` + echoSchema + `},` +
			`{"name":"normalize_records","description":` + jitDesc + `,"input_schema":` + jitSchema + `}]`,
	}
	for p, w := range want {
		got, err := render.Tools(defs, p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != w {
			t.Errorf("%s:\ngot  %s\nwant %s", p, got, w)
		}
	}
	if _, err := render.Tools(defs, "gemini"); codeOf(err) != "invalid_config" {
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

// Provider renderings must be accepted by the provider as a whole list, since one
// refused tool fails every request that carries it:
//   - MCP: a Tool's outputSchema is an object schema ({"type":"object", …}); the
//     TypeScript SDK refuses a tools/list in which one has another root, so such an
//     outputSchema is omitted. The SDK also wants each root property's schema to be
//     an object, so the boolean schemas true and false are written as {} and
//     {"not":{}}, which accept the same values.
//   - OpenAI: parameters "must have type 'object' and not have
//     'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level".
//   - Anthropic: "input_schema does not support oneOf, allOf, or anyOf at the top level".
//
// The kernel still checks calls and results against the full schemas.
func TestRenderPortableRoots(t *testing.T) {
	const eitherIn = `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}],"not":{"required":["c"]}}`
	outs := map[string]string{
		"string_out":   `{"type":"string"}`,
		"union_out":    `{"anyOf":[{"type":"object"},{"type":"null"}]}`,
		"nullable_out": `{"type":["object","null"]}`,
		"open_out":     `{}`,
		"object_out":   `{"type":"object","properties":{"ok":{"type":"boolean"}}}`,
	}
	var builtins []engine.Tool
	var names []string
	for name, out := range outs {
		builtins = append(builtins, builtin(name, `{"type":"object"}`, out, returns(`{"ok":true}`)))
		names = append(names, name)
	}
	builtins = append(builtins, builtin("either", eitherIn, "", returns(`{}`)),
		builtin("booleans", `{"type":"object","properties":{"any":true,"never":false}}`, `{"type":"object","properties":{"v":true}}`, returns(`{"v":[1]}`)))
	names = append(names, "either", "booleans")
	e := newEnv(t, engine.Config{Builtins: builtins})
	pid := e.spawn(t, engine.ProcessConfig{Tools: names})
	defs, err := e.k.Tools(pid)
	if err != nil {
		t.Fatal(err)
	}
	renderAs := func(p render.Provider) map[string]map[string]json.RawMessage {
		t.Helper()
		out, err := render.Tools(defs, p)
		if err != nil {
			t.Fatal(err)
		}
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatal(err)
		}
		m := map[string]map[string]json.RawMessage{}
		for _, item := range list {
			if fn, ok := item["function"]; ok { // OpenAI
				item = map[string]json.RawMessage{}
				if err := json.Unmarshal(fn, &item); err != nil {
					t.Fatal(err)
				}
			}
			var name string
			_ = json.Unmarshal(item["name"], &name)
			m[name] = item
		}
		return m
	}
	rootKeys := func(schema json.RawMessage) map[string]bool {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(schema, &m); err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for k := range m {
			keys[k] = true
		}
		return keys
	}

	mcp := renderAs(render.MCP)
	for name := range outs {
		_, has := mcp[name]["outputSchema"]
		if want := name == "object_out"; has != want {
			t.Errorf("mcp %s: outputSchema present = %v, want %v (%s)", name, has, want, mcp[name]["outputSchema"])
		}
	}
	if k := rootKeys(mcp["either"]["inputSchema"]); !k["anyOf"] || !k["not"] {
		t.Errorf("mcp keeps the whole input schema: %s", mcp["either"]["inputSchema"])
	}
	// The TypeScript SDK's Tool schema: {type: literal "object", properties?: record of
	// objects, required?: string[]} for inputSchema and, when present, outputSchema.
	for name, item := range mcp {
		for _, which := range []string{"inputSchema", "outputSchema"} {
			raw, ok := item[which]
			if !ok {
				continue
			}
			var root struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(raw, &root); err != nil || root.Type != "object" {
				t.Errorf("mcp %s %s: root is not type object: %s", name, which, raw)
			}
			for p, sub := range root.Properties {
				if len(sub) == 0 || sub[0] != '{' {
					t.Errorf("mcp %s %s: property %s is not an object schema: %s", name, which, p, sub)
				}
			}
		}
	}
	if got, want := string(mcp["booleans"]["inputSchema"]), `{"properties":{"any":{},"never":{"not":{}}},"type":"object"}`; got != want {
		t.Errorf("mcp booleans input:\ngot  %s\nwant %s", got, want)
	}
	if got, want := string(mcp["booleans"]["outputSchema"]), `{"properties":{"v":{}},"type":"object"}`; got != want {
		t.Errorf("mcp booleans output:\ngot  %s\nwant %s", got, want)
	}
	openAI := renderAs(render.OpenAI)
	anthropic := renderAs(render.Anthropic)
	for name := range openAI {
		for _, bad := range []string{"allOf", "anyOf", "const", "enum", "not", "oneOf"} {
			if rootKeys(openAI[name]["parameters"])[bad] {
				t.Errorf("openai %s: %q at the root of parameters: %s", name, bad, openAI[name]["parameters"])
			}
		}
		for _, bad := range []string{"allOf", "anyOf", "oneOf"} {
			if rootKeys(anthropic[name]["input_schema"])[bad] {
				t.Errorf("anthropic %s: %q at the root of input_schema: %s", name, bad, anthropic[name]["input_schema"])
			}
		}
	}
	if got, want := string(openAI["either"]["parameters"]), `{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"type":"object"}`; got != want {
		t.Errorf("openai either:\ngot  %s\nwant %s", got, want)
	}
	if got, want := string(anthropic["either"]["input_schema"]), `{"not":{"required":["c"]},"properties":{"a":{"type":"string"},"b":{"type":"string"}},"type":"object"}`; got != want {
		t.Errorf("anthropic either:\ngot  %s\nwant %s", got, want)
	}
	// What the renderings dropped is still enforced at the call.
	if _, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"either","arguments":{}}`)); codeOf(err) != "schema_invalid" {
		t.Fatalf("a call outside the full input schema: %v, want schema_invalid", err)
	}
	if _, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"string_out","arguments":{}}`)); codeOf(err) != "output_invalid" {
		t.Fatalf("a result outside the full output schema: %v, want output_invalid", err)
	}
	if _, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"booleans","arguments":{"any":[1,{"x":null}]}}`)); err != nil {
		t.Fatalf("true accepts anything: %v", err)
	}
	if _, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"booleans","arguments":{"never":1}}`)); codeOf(err) != "schema_invalid" {
		t.Fatalf("false accepts nothing: %v, want schema_invalid", err)
	}
}
