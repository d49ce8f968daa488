package render

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
)

// Tool is one function as a projection shows it to the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema and OutputSchema are the canonical text of the tool's schemas.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil when the tool declares none
	Annotations  Annotations
	// Strict reports that InputSchema fits the OpenAI strict-mode subset (root object,
	// every object closed with additionalProperties:false and every property required,
	// only supported keywords), so the OpenAI rendering can set strict:true.
	Strict bool
}

// Annotations are a tool's behaviour hints, as MCP defines them. The kernel reads
// OpenWorld (engine.Annotations is this type); the renderings state every hint.
type Annotations struct {
	Title       string
	ReadOnly    bool // the tool does not change its environment
	Destructive bool // the tool may destroy or overwrite (meaningful when not ReadOnly)
	Idempotent  bool // repeating a call with the same arguments has no further effect
	// OpenWorld: the tool talks to the world outside the libOS. Its tool_called is
	// synced before its handler runs, so an effect outside the store is never without
	// its record; other tools' tool_called is durable with their settlement.
	OpenWorld bool
}

// Provider names a rendering of a tool list.
type Provider string

const (
	// MCP renders MCP Tool objects (the "tools" array of a tools/list result).
	MCP Provider = "mcp"
	// OpenAI renders OpenAI chat-completions function tools.
	OpenAI Provider = "openai"
	// Anthropic renders Anthropic tool definitions.
	Anthropic Provider = "anthropic"
)

// Providers lists every rendering, in the order help texts name them. It is the one
// list: the CLI's --format flag and the MCP server take their choices from it.
func Providers() []Provider { return []Provider{MCP, OpenAI, Anthropic} }

// ParseProvider returns the provider named s, or an invalid_config error naming the
// choices.
func ParseProvider(s string) (Provider, error) {
	for _, p := range Providers() {
		if string(p) == s {
			return p, nil
		}
	}
	return "", liberr.New("render", "invalid_config", "unknown provider %q (want %s)", s, providerNames())
}

// providerNames is "mcp, openai or anthropic", for messages.
func providerNames() string {
	ps := Providers()
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Tools renders a projected tool list for a provider, as a JSON array. An unknown
// provider is an invalid_config error.
func Tools(defs []Tool, p Provider) (json.RawMessage, error) {
	out := make([]any, 0, len(defs))
	for _, d := range defs {
		switch p {
		case MCP:
			t := mcpTool{Name: d.Name, Description: d.Description, InputSchema: mcpSchema(d.InputSchema), OutputSchema: mcpOutputSchema(d.OutputSchema)}
			a := d.Annotations
			t.Annotations = &mcpAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnly, DestructiveHint: !a.ReadOnly && a.Destructive, IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld}
			out = append(out, t)
		case OpenAI:
			f := openAIFunction{Name: d.Name, Description: d.Description, Parameters: withoutRootKeys(d.InputSchema, openAIRootRefused)}
			if d.Strict {
				f.Strict = true
			}
			out = append(out, openAITool{Type: "function", Function: f})
		case Anthropic:
			out = append(out, anthropicTool{Name: d.Name, Description: d.Description, InputSchema: withoutRootKeys(d.InputSchema, anthropicRootRefused)})
		default:
			return nil, liberr.New("render", "invalid_config", "unknown provider %q (want %s)", p, providerNames())
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("render: tools: %w", err)
	}
	return b, nil
}

// renderDepth bounds the nesting of a schema decoded for rendering. The schemas were
// decoded within the kernel's MaxDepth when the tool was installed; this only has to
// be at least as large as any MaxDepth in use.
const renderDepth = 1 << 12

// mcpOutputSchema returns s when MCP can carry it, else nil. MCP's Tool.outputSchema
// must be an object schema, {"type":"object", …}: structuredContent is always a JSON
// object there, and clients enforce it (the TypeScript SDK refuses a whole tools/list
// in which one outputSchema has another root, so one tool would hide every other). A
// tool whose output schema's root does not say "type":"object" (a string result, an
// anyOf of objects, an open schema) is therefore listed without one. Nothing is lost
// for the kernel: every result is still checked against the full schema before it is
// persisted.
func mcpOutputSchema(s json.RawMessage) json.RawMessage {
	if len(s) == 0 {
		return nil
	}
	v, err := jsonexact.Decode(s, renderDepth)
	if err != nil || v.Kind != jsonexact.Object {
		return nil
	}
	if t, ok := v.Get("type"); !ok || t.Kind != jsonexact.String || t.S != "object" {
		return nil
	}
	return mcpSchema(s)
}

// mcpSchema returns an object-rooted schema in the form MCP clients accept. The
// TypeScript SDK also requires every root property's schema to be an object, while
// JSON Schema allows the boolean schemas true and false there; they are written as
// their object equivalents, {} and {"not":{}}, which accept exactly the same values.
func mcpSchema(s json.RawMessage) json.RawMessage {
	v, err := jsonexact.Decode(s, renderDepth)
	if err != nil || v.Kind != jsonexact.Object {
		return s
	}
	props, ok := v.Get("properties")
	if !ok || props.Kind != jsonexact.Object {
		return s
	}
	changed := false
	for i := range props.O {
		p := &props.O[i].Val
		if p.Kind != jsonexact.Bool {
			continue
		}
		if p.B {
			*p = jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}
		} else {
			*p = jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{{Key: "not", Val: jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}}}}
		}
		changed = true
	}
	if !changed {
		return s
	}
	return v.Canonical()
}

// Root keywords the providers refuse in a tool's parameters, in a request that then
// fails as a whole. OpenAI: "schema must have type 'object' and not have
// 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level" (const too). Anthropic:
// "input_schema does not support oneOf, allOf, or anyOf at the top level". The input
// schema's root is always "type":"object" (the kernel refuses any other tool), so
// these are the only root problems left.
var (
	openAIRootRefused    = []string{"allOf", "anyOf", "const", "enum", "not", "oneOf"}
	anthropicRootRefused = []string{"allOf", "anyOf", "oneOf"}
)

// withoutRootKeys returns schema without the given root keywords. A JIT tool's input
// schema is the model's own text, and one refused schema would make every later
// request of the process fail at the provider; so the rendering drops what the
// provider refuses and the model sees a looser schema. The kernel still validates
// every call against the full schema, and a call the dropped keywords would have
// refused fails with schema_invalid naming the violation.
func withoutRootKeys(schema json.RawMessage, refused []string) json.RawMessage {
	v, err := jsonexact.Decode(schema, renderDepth)
	if err != nil || v.Kind != jsonexact.Object {
		return schema
	}
	removed := false
	for _, k := range refused {
		removed = v.Remove(k) || removed
	}
	if !removed {
		return schema
	}
	return v.Canonical()
}

type mcpTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *mcpAnnotations `json:"annotations,omitempty"`
}

// mcpAnnotations are written in full: MCP's defaults for absent hints are the
// pessimistic ones (destructive, open world), so every hint is stated.
type mcpAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// strictKeywords are the schema keywords OpenAI strict mode supports.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "$defs": true, "$ref": true,
	"description": true, "title": true, "pattern": true, "format": true,
	"multipleOf": true, "maximum": true, "exclusiveMaximum": true, "minimum": true,
	"exclusiveMinimum": true, "minItems": true, "maxItems": true, "$schema": true,
}

// Strict reports whether an input schema fits OpenAI's strict mode, so the OpenAI
// rendering may say strict:true: supported keywords only, every object closed
// (additionalProperties:false) with every property required, a root of type object
// that is not a union. The kernel asks once, when it installs a tool.
func Strict(schema json.RawMessage) bool {
	v, err := jsonexact.Decode(schema, renderDepth)
	return err == nil && strictSubset(&v, true)
}

// strictSubset is Strict on a decoded schema; root is true at the schema's root.
func strictSubset(v *jsonexact.Value, root bool) bool {
	if v.Kind != jsonexact.Object {
		return false
	}
	if root {
		t, ok := v.Get("type")
		if !ok || t.Kind != jsonexact.String || t.S != "object" {
			return false
		}
		if _, ok := v.Get("anyOf"); ok {
			return false
		}
	} else if _, ok := v.Get("$schema"); ok {
		return false
	}
	isObject := false
	if t, ok := v.Get("type"); ok {
		switch t.Kind {
		case jsonexact.String:
			isObject = t.S == "object"
		case jsonexact.Array:
			for _, e := range t.A {
				isObject = isObject || (e.Kind == jsonexact.String && e.S == "object")
			}
		default:
			return false
		}
	}
	for _, m := range v.O {
		if !strictKeywords[m.Key] {
			return false
		}
	}
	props, hasProps := v.Get("properties")
	if isObject || hasProps {
		ap, ok := v.Get("additionalProperties")
		if !ok || ap.Kind != jsonexact.Bool || ap.B {
			return false
		}
		req, _ := v.Get("required")
		n := 0
		if hasProps {
			if props.Kind != jsonexact.Object {
				return false
			}
			n = len(props.O)
		}
		if req == nil {
			if n > 0 {
				return false
			}
		} else {
			if req.Kind != jsonexact.Array || len(req.A) != n {
				return false
			}
			seen := make(map[string]bool, n)
			for _, r := range req.A {
				if r.Kind != jsonexact.String || seen[r.S] {
					return false
				}
				seen[r.S] = true
				if _, ok := props.Get(r.S); !ok {
					return false
				}
			}
		}
		if hasProps {
			for i := range props.O {
				if !strictSubset(&props.O[i].Val, false) {
					return false
				}
			}
		}
	}
	if items, ok := v.Get("items"); ok && !strictSubset(items, false) {
		return false
	}
	if any, ok := v.Get("anyOf"); ok {
		if any.Kind != jsonexact.Array {
			return false
		}
		for i := range any.A {
			if !strictSubset(&any.A[i], false) {
				return false
			}
		}
	}
	if defs, ok := v.Get("$defs"); ok {
		if defs.Kind != jsonexact.Object {
			return false
		}
		for i := range defs.O {
			if !strictSubset(&defs.O[i].Val, false) {
				return false
			}
		}
	}
	return true
}
