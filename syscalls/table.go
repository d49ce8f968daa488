package syscalls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Capability is a plain string held by a process. Holding one grants exactly the
// routes that name it, nothing wider: there are no wildcards and no implication
// between capabilities (kv:write does not grant kv:read).
type Capability string

// The capabilities the routes require.
const (
	CapClockNow  Capability = "clock:now"
	CapKVRead    Capability = "kv:read"
	CapKVWrite   Capability = "kv:write"
	CapToolsCall Capability = "tools:call"
	CapNetFetch  Capability = "net:fetch"
)

// ApprovalClass says who must approve a call before its provider runs.
type ApprovalClass string

const (
	// ApprovalNone: no approval beyond the capability.
	ApprovalNone ApprovalClass = "none"
	// ApprovalOperator: an operator decision (or an approval policy) is awaited,
	// bounded by the call's deadline.
	ApprovalOperator ApprovalClass = "operator"
)

// SideEffect says whether a route changes state.
type SideEffect string

const (
	EffectRead  SideEffect = "read"
	EffectWrite SideEffect = "write"
	// EffectExternal: the route acts outside the store (the network). The router
	// makes the call's record durable before its provider runs.
	EffectExternal SideEffect = "external"
)

// Route describes one syscall: what `libos syscalls` prints and what docs are made
// from. It is a copy; changing it changes nothing in the router.
type Route struct {
	Name         string
	Doc          string
	Capability   Capability
	Approval     ApprovalClass
	Effect       SideEffect
	Provider     string
	ArgsSchema   json.RawMessage
	ResultSchema json.RawMessage
	// Policy names the slots of the image's route policy the route reads, in the
	// order of Slots.
	Policy []PolicySlot
}

// authority is a route's capability decision. Its fields are unexported and the only
// constructors are reads and writes, which both demand a capability and an approval
// class: a route cannot be declared without deciding who may call it.
type authority struct {
	capability Capability
	approval   ApprovalClass
	effect     SideEffect
}

// reads declares a route that changes nothing.
func reads(c Capability, a ApprovalClass) authority {
	return authority{capability: c, approval: a, effect: EffectRead}
}

// writes declares a route that changes state.
func writes(c Capability, a ApprovalClass) authority {
	return authority{capability: c, approval: a, effect: EffectWrite}
}

// reaches declares a route that acts outside the store; its provider must be external.
func reaches(c Capability, a ApprovalClass) authority {
	return authority{capability: c, approval: a, effect: EffectExternal}
}

// route is one entry of the table.
type route struct {
	name     string
	doc      string
	auth     authority
	args     string // JSON Schema 2020-12, as text
	result   string
	provider provider

	// slots are the parts of the image's policy the route reads (CompilePolicy gives
	// it no other): the router's own stages read approval (stage approval), budget
	// (stage budget) and size (stages args_size and result_size); check and flow are
	// the route's own stages that read the rest: check (stage "policy") decides what the
	// image's slot says of these arguments, flow (stage "data_flow") whether the
	// call's labels may reach this sink. Both run after the arguments are validated
	// and before any budget is charged.
	slots []PolicySlot
	check func(c *call) error
	flow  func(c *call) error
	// opaqueArgs keeps the arguments out of the audit log (only size and digest):
	// they may hold bodies.
	opaqueArgs bool

	argsSchema   *jsonschema.Schema
	resultSchema *jsonschema.Schema
}

func declare(name, doc string, auth authority, args, result string, p provider) route {
	return route{name: name, doc: doc, auth: auth, args: args, result: result, provider: p}
}

// governedBy gives a route its policy slots and the stages that read them.
func (r route) governedBy(check, flow func(c *call) error, slots ...PolicySlot) route {
	r.check, r.flow, r.slots = check, flow, slots
	return r
}

// Bounds of the kv routes. Keys are compared byte-wise; values are stored as compact
// JSON text.
const (
	MaxKVKeyBytes   = 256
	MaxKVValueBytes = 64 << 10
	MaxKVListLimit  = 1000
	// DefaultKVListLimit applies when kv.list gets no limit.
	DefaultKVListLimit = 100
)

// table is the one declaration of every route. Docs, `libos syscalls`, the router and
// the table test all read it.
var table = []route{
	declare("clock.now",
		"The current time in an IANA time zone: ISO 8601 with a numeric offset, Unix seconds, and the zone.",
		reads(CapClockNow, ApprovalNone),
		`{"type":"object","properties":{
			"timezone":{"type":"string","minLength":1,"maxLength":64,"pattern":"^[A-Za-z0-9_+\\-/]+$"}},
		  "required":["timezone"],"additionalProperties":false}`,
		`{"type":"object","properties":{
			"iso8601":{"type":"string"},
			"unix_seconds":{"type":"integer"},
			"timezone":{"type":"string"}},
		  "required":["iso8601","unix_seconds","timezone"],"additionalProperties":false}`,
		clockNow).governedBy(nil, nil, SlotApproval, SlotBudget),
	declare("kv.get",
		"Read one key of the calling process's key/value space: found, and the stored JSON value (null when not found).",
		reads(CapKVRead, ApprovalNone),
		`{"type":"object","properties":{
			"key":{"type":"string","minLength":1,"maxLength":256}},
		  "required":["key"],"additionalProperties":false}`,
		`{"type":"object","properties":{
			"found":{"type":"boolean"},
			"value":true},
		  "required":["found","value"],"additionalProperties":false}`,
		kvGet).governedBy(nil, nil, SlotApproval, SlotBudget, SlotSize, SlotLabels),
	declare("kv.put",
		"Store one JSON value under a key of the calling process's key/value space, durably.",
		writes(CapKVWrite, ApprovalNone),
		`{"type":"object","properties":{
			"key":{"type":"string","minLength":1,"maxLength":256},
			"value":true},
		  "required":["key","value"],"additionalProperties":false}`,
		`{"type":"object","additionalProperties":false}`,
		kvPut).governedBy(nil, flowKVPut, SlotApproval, SlotBudget, SlotSize, SlotLabels, SlotDataFlow),
	declare("kv.delete",
		"Delete one key of the calling process's key/value space; deleted says whether it existed.",
		writes(CapKVWrite, ApprovalNone),
		`{"type":"object","properties":{
			"key":{"type":"string","minLength":1,"maxLength":256}},
		  "required":["key"],"additionalProperties":false}`,
		`{"type":"object","properties":{
			"deleted":{"type":"boolean"}},
		  "required":["deleted"],"additionalProperties":false}`,
		kvDelete).governedBy(nil, nil, SlotApproval, SlotBudget, SlotSize),
	declare("kv.list",
		"List keys of the calling process's key/value space with a prefix, in byte order, one page at a time; pass next_cursor back to continue.",
		reads(CapKVRead, ApprovalNone),
		`{"type":"object","properties":{
			"prefix":{"type":"string","maxLength":256},
			"limit":{"type":"integer","minimum":1,"maximum":1000},
			"cursor":{"type":["string","null"],"maxLength":1024}},
		  "additionalProperties":false}`,
		`{"type":"object","properties":{
			"keys":{"type":"array","items":{"type":"string"}},
			"next_cursor":{"type":["string","null"]}},
		  "required":["keys","next_cursor"],"additionalProperties":false}`,
		kvList).governedBy(nil, nil, SlotApproval, SlotBudget, SlotSize, SlotLabels),
	declare("tools.call",
		"Call another tool of the calling process through the full tool-call pipeline, with its own checks; the result is that tool's result.",
		writes(CapToolsCall, ApprovalNone),
		`{"type":"object","properties":{
			"tool":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$","not":{"const":"run_jit_tool"}},
			"arguments":{"type":"object"}},
		  "required":["tool","arguments"],"additionalProperties":false}`,
		`true`,
		toolsCall).governedBy(nil, flowToolsCall, SlotApproval, SlotBudget, SlotSize, SlotDataFlow),
	withOpaqueArgs(declare("net.fetch",
		"Fetch an http(s) URL from a host the image allows; headers may name secrets as {{secret:NAME}}, replaced on the host for that secret's hosts; the body comes back as text, or base64 when it is not UTF-8.",
		reaches(CapNetFetch, ApprovalNone),
		`{"type":"object","properties":{
			"url":{"type":"string","minLength":1,"maxLength":8192},
			"method":{"type":"string","pattern":"^[A-Z]{1,16}$"},
			"headers":{"type":"object","maxProperties":64,"additionalProperties":{"type":"string","maxLength":8192}},
			"body":{"type":["string","null"]},
			"body_encoding":{"enum":["text","base64"]}},
		  "required":["url"],"additionalProperties":false}`,
		`{"type":"object","properties":{
			"status":{"type":"integer","minimum":100,"maximum":999},
			"headers":{"type":"object","additionalProperties":{"type":"string"}},
			"body":{"type":"string"},
			"body_encoding":{"enum":["text","base64"]},
			"url":{"type":"string"}},
		  "required":["status","headers","body","body_encoding","url"],"additionalProperties":false}`,
		netFetch).governedBy(checkFetch, flowFetch, SlotApproval, SlotBudget, SlotSize, SlotNet, SlotSecrets, SlotLabels, SlotDataFlow)),
}

func withOpaqueArgs(r route) route {
	r.opaqueArgs = true
	return r
}

var (
	compileOnce sync.Once
	compiled    map[string]*route
	compileErr  error
)

// routes compiles every schema of the table once and indexes the table by name.
func routes() (map[string]*route, error) {
	compileOnce.Do(func() { compiled, compileErr = compileTable(table) })
	return compiled, compileErr
}

func compileTable(t []route) (map[string]*route, error) {
	out := make(map[string]*route, len(t))
	for i := range t {
		r := t[i]
		if _, dup := out[r.name]; dup {
			return nil, fmt.Errorf("syscalls: route %q declared twice", r.name)
		}
		var err error
		if r.argsSchema, err = compileSchema(r.name+"/args", r.args); err != nil {
			return nil, err
		}
		if r.resultSchema, err = compileSchema(r.name+"/result", r.result); err != nil {
			return nil, err
		}
		out[r.name] = &r
	}
	return out, nil
}

func compileSchema(name, text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		return nil, fmt.Errorf("syscalls: schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "libos:///syscalls/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("syscalls: schema %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("syscalls: schema %s: %w", name, err)
	}
	return s, nil
}

// Routes returns the table, sorted by name, for docs and `libos syscalls`. It is meant
// for the host and the operator: nothing reachable from a guest returns it.
func Routes() []Route {
	out := make([]Route, 0, len(table))
	for _, r := range table {
		out = append(out, Route{
			Name:         r.name,
			Doc:          r.doc,
			Capability:   r.auth.capability,
			Approval:     r.auth.approval,
			Effect:       r.auth.effect,
			Provider:     r.provider.name,
			ArgsSchema:   compactSchema(r.args),
			ResultSchema: compactSchema(r.result),
			Policy:       append([]PolicySlot(nil), r.slots...),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func compactSchema(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return json.RawMessage(s) // the table test fails on this
	}
	return b.Bytes()
}

// Signature is the route's one-line summary as the model reads it in an image's
// instructions, made from the table so that it cannot drift: the name, the argument
// fields (an optional one marked "?"), the result fields and the capability, e.g.
//
//	kv.list {"prefix"?, "limit"?, "cursor"?} -> {"keys", "next_cursor"} (kv:read)
//
// A result whose schema names no fields is "any JSON" when it accepts anything.
func (r Route) Signature() string {
	return fmt.Sprintf("%s %s -> %s (%s)", r.Name, fieldList(r.ArgsSchema, true), fieldList(r.ResultSchema, false), r.Capability)
}

// fieldList renders the top-level properties of an object schema in declaration
// order; the table's schemas are written in the order a reader should meet them.
func fieldList(schema json.RawMessage, markOptional bool) string {
	if string(schema) == "true" {
		return "any JSON"
	}
	var doc struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil || len(doc.Properties) == 0 {
		return "{}"
	}
	required := map[string]bool{}
	for _, n := range doc.Required {
		required[n] = true
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Properties))
	var names []string
	if _, err := dec.Token(); err != nil { // {
		return "{}"
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "{}"
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "{}"
		}
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = strconv.Quote(n)
		if markOptional && !required[n] {
			parts[i] += "?"
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
