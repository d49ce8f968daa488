package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/internal/schemaerr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// ToolKind says where a tool in a process tool table comes from.
type ToolKind string

const (
	// KindBuiltin tools come from the kernel's Config.Builtins and are enabled per process.
	KindBuiltin ToolKind = "builtin"
	// KindJIT tools are process-local tools installed with Kernel.InstallTool.
	KindJIT ToolKind = "jit"
)

// RunJITTool is the multiplexed projection's pseudo-function (image.RunJITTool). It
// is never a process tool: no tool may have this name, it is never installed in a
// tool table, and the host API refuses it.
const RunJITTool = image.RunJITTool

// Handler runs one tool call. It receives the normalised call and returns the result
// as JSON; the pipeline checks the result's size, exactness and output schema before
// anything is persisted. A returned error settles the call as failed with the code of
// the outermost error in its chain that has one (an *Error, or any error with an
// ErrorCode() string method): a handler's typed error keeps its code even when it
// wraps an *Error. Without any code the call fails with tool_failed.
type Handler func(ctx context.Context, call *Call) (json.RawMessage, error)

// Annotations are a tool's behaviour hints (render.Annotations: the renderings state
// them to the model). OpenWorld decides when the tool's tool_called is synced.
type Annotations = render.Annotations

// Tool is one entry of a process tool table: a name, a contract and a handler.
type Tool struct {
	// Name matches ^[A-Za-z0-9_-]{1,64}$ and is never run_jit_tool.
	Name        string
	Description string
	// InputSchema is a JSON Schema (2020-12 unless it says otherwise) whose root
	// accepts objects ("type":"object"). Required.
	InputSchema json.RawMessage
	// OutputSchema, when set, is checked against every result before it is persisted.
	OutputSchema json.RawMessage
	Annotations  Annotations
	// Kind is KindBuiltin for Config.Builtins (the zero value means builtin there) and
	// KindJIT for InstallTool.
	Kind ToolKind
	// ID is the stable identity of a JIT tool (tool_…); empty for built-ins.
	ID      string
	Handler Handler
}

// Call is one normalised tool call as a handler sees it.
type Call struct {
	PID    string
	CallID string // call_ + 128 random bits, hex
	// Tool is the resolved tool name; for run_jit_tool it is the JIT tool it routed to.
	Tool string
	Kind ToolKind
	// Action is the internal action the adapter injects: the function name the model
	// selected (run_jit_tool when the multiplexer routed the call). A top-level
	// "action" argument never reaches Args.
	Action string
	// Args is the exact arguments object as compact JSON, members in the order the
	// caller sent them, numbers as written, without the top-level action.
	Args json.RawMessage
	// Value is Args as the adapter decoded them (exact JSON, internal/jsonexact): an
	// object for every call the kernel runs, handed down so that a handler reads its
	// arguments without parsing them again and without calling back into the kernel.
	// A Call made outside the pipeline may leave it zero (JSON null): Args holds the
	// arguments then.
	Value jsonexact.Value
	// ArgsDoc is Args as a jsonexact.Doc, the proof that they are exact JSON, so that
	// a handler hands them on (to the sandbox, wasm.Engine.RunDoc) without their being
	// checked as JSON again. Zero for a Call made outside the pipeline.
	ArgsDoc jsonexact.Doc
	// Via is "model" for HandleFrame and "host" for the host API.
	Via string
	// Projection is the process's projection as the call was looked up: a handler that
	// answers with a tool's name checks it, since a multiplexed process hides its JIT
	// tools' names from the model.
	Projection Projection
	// Depth is the tools.call nesting depth: 0 for a call from the model or the host.
	Depth int
	// Capabilities are the capabilities the process held when the call was opened.
	// Syscalls must not use this snapshot: Syscalls holds the live set. The slice is
	// shared with the process's other calls until its set changes: read only.
	Capabilities []string
	// Syscalls is the authority this call's syscalls run with, filled in by the
	// kernel before the handler runs: the process's live capability set (a revocation
	// stops the next syscall, even of this call), the kernel as approver, the image's
	// route approvals, syscall budgets, journal bounds and route policy, the host
	// tools for tools.call, this call's depth, and for a JIT tool its call ID (every
	// result its code receives is journaled). A handler hands it to
	// syscalls.Router.For as it is: nothing on the way to a syscall calls back into
	// the kernel. A Call made outside the pipeline has the zero Caller, which holds
	// no capability.
	Syscalls syscalls.Caller
	// Sandbox are the image's bounds for one JIT tool call in the sandbox (zero
	// fields: the sandbox's defaults).
	Sandbox image.SandboxLimits

	// ret is the result the handler handed over with Return, and out the text
	// Return gave it to return.
	ret    jsonexact.Doc
	retOut json.RawMessage

	// deferMu guards deferred, the work handed over with Defer and not yet run.
	deferMu  sync.Mutex
	deferred []func()

	k *Kernel
	p *process
}

// Defer hands the pipeline work that the call's answer need not wait for: a JIT
// tool's sandbox instance, to be brought back to its snapshot for the next call. The
// pipeline runs fn once the call's settlement is applied, just before it asks for the
// sync the answer waits for (store.UpdateMeanwhile), so fn should only start the work
// (a goroutine) that then runs while the disk syncs; on a path that settles otherwise
// (a failed handler, a refused result) it runs fn before dispatch returns. A Call made
// outside the pipeline runs fn at once.
func (c *Call) Defer(fn func()) {
	if c.k == nil {
		fn()
		return
	}
	c.deferMu.Lock()
	c.deferred = append(c.deferred, fn)
	c.deferMu.Unlock()
}

// runDeferred runs the work handed over with Defer so far, each once.
func (c *Call) runDeferred() {
	c.deferMu.Lock()
	fns := c.deferred
	c.deferred = nil
	c.deferMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Return hands the pipeline the handler's result as a jsonexact.Doc (a value the
// handler decoded or built, exact by construction) and returns its text, which the
// handler returns:
//
//	return call.Return(doc), nil
//
// The pipeline then checks the result (size, depth, output schema) and normalises it
// from the value, without parsing the text again. A handler that returns other bytes
// than Return gave it has them parsed as usual.
func (c *Call) Return(d jsonexact.Doc) json.RawMessage {
	out := d.Bytes()
	c.ret, c.retOut = d, out
	return out
}

// returned is the Doc behind out when out is exactly the text Return handed out.
func (c *Call) returned(out json.RawMessage) (jsonexact.Doc, bool) {
	r := c.retOut
	if c.ret.IsZero() || len(out) == 0 || len(out) != len(r) || &out[0] != &r[0] {
		return jsonexact.Doc{}, false
	}
	return c.ret, true
}

// ToolKinds returns the calling process's tool table as it is now, name → kind: what
// a handler that adds a tool (the JIT lifecycle's register) checks a new name
// against. The kernel running the call is reached through the call, so no tool
// package keeps a kernel of its own.
func (c *Call) ToolKinds() (map[string]ToolKind, error) {
	if c.k == nil {
		return nil, errorf(CodeInvalidState, "%s: the call is not running in a kernel", c.Tool)
	}
	info, err := c.k.Process(c.PID)
	if err != nil {
		return nil, err
	}
	return info.Tools, nil
}

// InstallTool installs t in the calling process's tool table, as Kernel.InstallTool
// does: atomically with persist and a tools_changed event.
func (c *Call) InstallTool(ctx context.Context, t Tool, persist func(tx *store.Tx) error) error {
	if c.k == nil {
		return errorf(CodeInvalidState, "%s: the call is not running in a kernel", c.Tool)
	}
	return c.k.InstallTool(ctx, c.PID, t, persist)
}

var toolNameRE = image.ToolName

// entry is a tool with its schemas compiled once.
type entry struct {
	Tool
	in, out *jsonschema.Schema
	// inPlain and outPlain are the same schemas for the fast check when they use only
	// the plain keywords (plainschema.go); nil otherwise.
	inPlain, outPlain *plainSchema
	inSchema          json.RawMessage // canonical text, for rendering
	outSchema         json.RawMessage
	strict            bool   // the input schema fits the OpenAI strict-mode subset
	defHash           string // what approvals are bound to (definitionHash)
}

func toolErr(name, format string, args ...any) *Error {
	return errorf(CodeInvalidTool, "tool %q: "+format, append([]any{name}, args...)...)
}

func compileTool(t Tool, maxDepth int) (*entry, error) {
	if t.Name == RunJITTool {
		return nil, toolErr(t.Name, "%s is reserved for the multiplexed projection and is never a process tool", RunJITTool)
	}
	if !toolNameRE().MatchString(t.Name) {
		return nil, toolErr(t.Name, "the name must match %s", toolNameRE())
	}
	if t.Handler == nil {
		return nil, toolErr(t.Name, "no handler")
	}
	if t.Kind == "" {
		t.Kind = KindBuiltin
	}
	if t.Kind != KindBuiltin && t.Kind != KindJIT {
		return nil, toolErr(t.Name, "unknown kind %q", t.Kind)
	}
	e := &entry{Tool: t}
	if len(t.InputSchema) == 0 {
		return nil, toolErr(t.Name, "no input schema")
	}
	var err error
	var doc jsonexact.Value
	if e.in, doc, err = compileSchema(t.Name, "input", t.InputSchema, maxDepth); err != nil {
		return nil, err
	}
	if tp, ok := doc.Get("type"); !ok || tp.Kind != jsonexact.String || tp.S != "object" {
		return nil, toolErr(t.Name, `the input schema's root must be {"type":"object", …}`)
	}
	e.inPlain = compilePlain(&doc)
	e.inSchema = doc.Canonical()
	e.strict = render.Strict(e.inSchema)
	if len(t.OutputSchema) > 0 {
		if e.out, doc, err = compileSchema(t.Name, "output", t.OutputSchema, maxDepth); err != nil {
			return nil, err
		}
		e.outPlain = compilePlain(&doc)
		e.outSchema = doc.Canonical()
	}
	e.defHash = definitionHash(e.Tool, e.inSchema, e.outSchema)
	return e, nil
}

// noLoader refuses every URL that is not already in the compiler: a tool schema never
// makes the kernel fetch a remote (or local file) $ref.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not loaded from %s: only the tool's own schema and the JSON Schema meta-schemas resolve", url)
}

func compileSchema(tool, which string, raw json.RawMessage, maxDepth int) (*jsonschema.Schema, jsonexact.Value, error) {
	doc, err := jsonexact.Decode(raw, maxDepth)
	if err != nil {
		return nil, jsonexact.Value{}, toolErr(tool, "%s schema is not exact JSON: %v", which, err)
	}
	if doc.Kind != jsonexact.Object {
		return nil, jsonexact.Value{}, toolErr(tool, "%s schema must be a JSON object, got %s", which, doc.Kind)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "urn:libos:tool:" + tool + ":" + which
	if err := c.AddResource(loc, doc.ToAny()); err != nil {
		return nil, jsonexact.Value{}, toolErr(tool, "%s schema: %v", which, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, jsonexact.Value{}, toolErr(tool, "%s schema does not compile: %v", which, schemaerr.Canonical(err))
	}
	return s, doc, nil
}

// validate checks v against s and returns the violations as data. plain, when not
// nil, is s for the fast check: what it accepts is valid without asking s.
func validate(s *jsonschema.Schema, plain *plainSchema, v *jsonexact.Value) []Detail {
	if plain != nil && plain.accepts(v) {
		return nil
	}
	err := schemaerr.Canonical(s.Validate(v.ToAny()))
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Detail{{Path: "", Message: err.Error()}}
	}
	var out []Detail
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil {
			out = append(out, Detail{Path: u.InstanceLocation, Message: u.Error.String()})
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.BasicOutput())
	if len(out) == 0 {
		out = []Detail{{Message: ve.Error()}}
	}
	// Leaf findings first; the "does not validate" summaries last.
	sort.SliceStable(out, func(i, j int) bool {
		return !strings.HasPrefix(out[i].Message, "validation failed") && strings.HasPrefix(out[j].Message, "validation failed")
	})
	return out
}
