package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// Event types the kernel writes to a process's log.
const (
	EventProcessSpawned = "process_spawned"
	// EventProtocolRejected: a frame failed the adapter; nothing was dispatched. Its
	// data keeps the frame's first MaxRejectedFrameBytes (frame, or frame_base64 when
	// they are not UTF-8; frame_truncated when cut), its size and sha256.
	EventProtocolRejected = "protocol_rejected"
	// EventCallRejected: a normalised call was refused before tool_called (unknown or
	// hidden tool, oversized argument, schema, visibility gate, budget).
	EventCallRejected = "call_rejected"
	// EventToolCalled opens a call: the handler is about to run.
	EventToolCalled = store.EventToolCalled
	// EventToolResult settles a call whose ToolResult is persisted.
	EventToolResult = store.EventToolResult
	// EventToolFailed settles a call that failed after tool_called, with its code.
	EventToolFailed = store.EventToolFailed
	// EventUnknownSettlement settles, on Open, a call the kernel stopped in.
	EventUnknownSettlement = store.EventUnknownSettlement
	// EventToolsChanged records a change of the tool table or the visibility gate.
	EventToolsChanged = "tools_changed"
)

// Result is the normalised result of one tool call: the same value twice, as
// structured JSON and as its canonical JSON text (MCP's structuredContent and text
// content). Both are the canonical form: compact, object keys sorted, numbers exactly
// as the tool wrote them, so the text never loses precision.
type Result struct {
	PID    string
	CallID string
	Tool   string
	// Structured is the result value (canonical JSON).
	Structured json.RawMessage
	// Text is the same value as a text content block.
	Text string
}

// request is a call after the adapter (or the host API's argument check).
type request struct {
	name       string
	args       jsonexact.Value
	argBytes   int
	fromAction bool
	via        string
	depth      int
}

const (
	viaModel = "model"
	viaHost  = "host"
)

// HandleFrame runs one provider frame from the model through the whole pipeline:
// adapter → projection/lookup → argument size → input schema → visibility gate →
// budget → tool_called → handler → result size → output schema → normalisation →
// ToolResult → tool_result. It accepts every frame shape the adapter knows (OpenAI,
// Anthropic, MCP, plain). Errors are *Error values; which events exist after each
// kind of failure is part of the contract (see the package documentation).
func (k *Kernel) HandleFrame(ctx context.Context, pid string, frame []byte) (*Result, error) {
	p, err := k.enterProcess(pid)
	if err != nil {
		return nil, err
	}
	defer k.calls.Done()
	ctx = withCallQuota(ctx, p.limits)
	n, err := normalizeFrame(frame, adapterLimitsOf(p.limits))
	if err != nil {
		return nil, k.rejectFrame(ctx, p, viaModel, frame, err)
	}
	return k.dispatch(ctx, p, request{name: n.name, args: n.args, argBytes: n.argBytes, fromAction: n.fromAction, via: viaModel})
}

// Runtime is the host API of a kernel.
type Runtime struct {
	// Tools is runtime.tools: calling process tools from the host.
	Tools *HostTools
}

// HostTools calls process tools on behalf of the host (runtime.tools.call in the protocol-diagnostics Skill)
// and of tools.call syscalls. It looks names up in the process tool table, not in the
// model's projection: JIT tools are reachable in both modes, run_jit_tool never is.
// Otherwise the pipeline is the model's, events included.
type HostTools struct{ k *Kernel }

// Call runs tool name of process pid with args (a JSON object; empty or null means {}).
// The reserved top-level action key is removed as for model calls.
func (h *HostTools) Call(ctx context.Context, pid, name string, args json.RawMessage) (*Result, error) {
	return h.call(ctx, pid, name, args, nil, 0)
}

// CallTool is Call for a tools.call syscall at nesting depth depth; it returns the
// structured result. It has the shape of syscalls.ToolCaller.
func (h *HostTools) CallTool(ctx context.Context, pid, tool string, args json.RawMessage, depth int) (json.RawMessage, error) {
	r, err := h.call(ctx, pid, tool, args, nil, depth)
	if err != nil {
		return nil, err
	}
	return r.Structured, nil
}

// CallToolValue is CallTool for arguments the syscall boundary has already decoded
// exactly: value is args decoded. The kernel applies the host API's argument rules to
// the value instead of parsing args again. It has the shape of
// syscalls.ValueToolCaller.
func (h *HostTools) CallToolValue(ctx context.Context, pid, tool string, args json.RawMessage, value jsonexact.Value, depth int) (json.RawMessage, error) {
	r, err := h.call(ctx, pid, tool, args, &value, depth)
	if err != nil {
		return nil, err
	}
	return r.Structured, nil
}

// The tools.call provider hands HostTools the arguments it decoded.
var _ syscalls.ValueToolCaller = (*HostTools)(nil)

// call runs one host call. value, when not nil, is args as already decoded exactly.
func (h *HostTools) call(ctx context.Context, pid, name string, args json.RawMessage, value *jsonexact.Value, depth int) (*Result, error) {
	k := h.k
	p, err := k.enterProcess(pid)
	if err != nil {
		return nil, err
	}
	defer k.calls.Done()
	ctx = withCallQuota(ctx, p.limits)
	v, err := hostValue(args, value, p.limits)
	if err != nil {
		return nil, k.rejectFrame(ctx, p, viaHost, args, err)
	}
	v.Remove(actionKey)
	return k.dispatch(ctx, p, request{name: ToolName(name), args: v, argBytes: len(args), via: viaHost, depth: depth})
}

// storageCode is the code of a failed store write: limit_exceeded when a quota refused
// it (the call appended more than its share, or the log is full), storage_failed
// otherwise.
func storageCode(err error) Code {
	if errors.Is(err, store.ErrLimitExceeded) {
		return CodeLimitExceeded
	}
	return CodeStorage
}

// withCallQuota gives a top-level call its store quota: the events and bytes it and
// everything it calls may append, and the length of the process's log. A nested call
// (a tools.call syscall runs under its caller's context) shares its caller's quota, so
// a fan-out is bounded as a whole.
func withCallQuota(ctx context.Context, l Limits) context.Context {
	if store.QuotaFrom(ctx) != nil {
		return ctx
	}
	return store.WithQuota(ctx, &store.Quota{MaxEvents: l.MaxCallEvents, MaxBytes: l.MaxCallEventBytes, MaxSeq: uint64(l.MaxLogEvents), MaxLogBytes: uint64(l.MaxLogBytes)})
}

// hostArgs applies the adapter's argument rules to host-supplied arguments.
func hostArgs(args json.RawMessage, lim Limits) (jsonexact.Value, error) {
	if len(args) > adapterLimitsOf(lim).maxFrameBytes {
		return jsonexact.Value{}, errorf(CodeLimitExceeded, "protocol frame: arguments are %d bytes, more than the %d-byte frame limit", len(args), adapterLimitsOf(lim).maxFrameBytes)
	}
	if len(strings.TrimSpace(string(args))) == 0 {
		return jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}, nil
	}
	v, err := jsonexact.Decode(args, lim.MaxDepth)
	if err != nil {
		return v, decodeErr("arguments", err)
	}
	switch v.Kind {
	case jsonexact.Null:
		return jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}, nil
	case jsonexact.Object:
		return v, nil
	}
	return v, protocolErr("arguments must be a JSON object, got %s", v.Kind)
}

// hostValue is hostArgs for arguments that may come decoded already (value, with its
// text args): the same rules, applied to the value. Whatever would be refused (over
// the frame limit, deeper than the process's bound, not an object) is left to
// hostArgs, so that the refusal reads the same. The value's members are copied, as
// the caller's decoding must not change when action is removed.
func hostValue(args json.RawMessage, value *jsonexact.Value, lim Limits) (jsonexact.Value, error) {
	if value == nil || len(args) > adapterLimitsOf(lim).maxFrameBytes || depth(value) > lim.MaxDepth {
		return hostArgs(args, lim)
	}
	switch value.Kind {
	case jsonexact.Null:
		return jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}, nil
	case jsonexact.Object:
		v := *value
		v.O = slices.Clone(v.O)
		if v.O == nil {
			v.O = []jsonexact.Member{}
		}
		return v, nil
	}
	return hostArgs(args, lim)
}

// viaTransport marks a frame refused by the transport in front of the adapter.
const viaTransport = "transport"

// MaxRejectedFrameBytes bounds the part of a rejected frame its protocol_rejected
// event keeps.
const MaxRejectedFrameBytes = 4 << 10

// RejectFrame records that a message addressed to process pid was refused by the
// transport in front of the adapter (a JSON-RPC message that is not exact JSON, a
// batch, an envelope or params member of the wrong case, type or number) and returns
// the protocol_frame error that says why. Nothing was dispatched: like every frame the
// adapter refuses, the refusal is a protocol_rejected event, never a tool failure. The
// error is a storage error when the refusal could not be recorded.
func (k *Kernel) RejectFrame(ctx context.Context, pid string, frame []byte, reason string) error {
	err := protocolErr("%s", reason)
	if e := k.enter(); e != nil {
		return errors.Join(err, e)
	}
	defer k.calls.Done()
	p, perr := k.process(pid)
	if perr != nil {
		return errors.Join(err, perr)
	}
	return k.rejectFrame(ctx, p, viaTransport, frame, err)
}

// rejectFrame records a protocol rejection (never a tool failure) and returns err,
// or a storage error when the rejection could not be recorded.
func (k *Kernel) rejectFrame(ctx context.Context, p *process, via string, frame []byte, err error) error {
	var e *Error
	errors.As(err, &e)
	sum := sha256.Sum256(frame)
	m := map[string]any{
		"code": e.Code, "reason": e.Message, "via": via,
		"frame_bytes": len(frame), "frame_sha256": hex.EncodeToString(sum[:]),
	}
	// The frame itself is the repair evidence the protocol-diagnostics Skill asks for
	// when no tool ran: kept bounded, for the operator (libos events --rejected). The
	// error returned to the model never carries it.
	head := frame[:min(len(frame), MaxRejectedFrameBytes)]
	if len(frame) > MaxRejectedFrameBytes {
		m["frame_truncated"] = true
		for cut := len(head); cut > len(head)-utf8.UTFMax && cut > 0; cut-- {
			if utf8.Valid(head[:cut]) {
				head = head[:cut]
				break
			}
		}
	}
	if utf8.Valid(head) {
		m["frame"] = string(head)
	} else {
		m["frame_base64"] = base64.StdEncoding.EncodeToString(head)
	}
	data, _ := json.Marshal(m)
	if _, serr := k.st.Append(context.WithoutCancel(ctx), p.pid, EventProtocolRejected, data); serr != nil {
		return &Error{Layer: layer, Code: storageCode(serr), Message: "could not record the protocol rejection: " + serr.Error(), Err: errors.Join(err, serr)}
	}
	return err
}

// rejectCall records a call refused before tool_called and returns err.
func (k *Kernel) rejectCall(ctx context.Context, p *process, req *request, err *Error) error {
	m := map[string]any{"tool": req.name, "code": err.Code, "reason": err.Message, "via": req.via}
	if len(err.Details) > 0 {
		m["details"] = err.Details
	}
	if req.depth > 0 {
		m["depth"] = req.depth
	}
	data, _ := json.Marshal(m)
	if _, serr := k.st.Append(context.WithoutCancel(ctx), p.pid, EventCallRejected, data); serr != nil {
		return &Error{Layer: layer, Code: storageCode(serr), Message: "could not record the rejected call: " + serr.Error(), Err: errors.Join(err, serr)}
	}
	return err
}

func unknownTool(name string) *Error {
	return &Error{Layer: layer, Code: CodeUnknownTool, Message: fmt.Sprintf("no tool named %q in this process's projection", name)}
}

// admitted is a call on its way through the stages before tool_called: each stage
// reads it and may narrow it (lookup finds the entry, the input stage unwraps
// run_jit_tool's envelope).
type admitted struct {
	req  *request
	e    *entry
	mux  bool            // the model called run_jit_tool in the multiplexed projection
	args jsonexact.Value // the arguments the tool gets (the nested ones for run_jit_tool)
	proj Projection      // the process's projection, as lookup read it
}

// stage is one step of the pipeline before tool_called. A refusal is returned as an
// *Error and recorded by dispatch as call_rejected; nothing is open yet.
type stage struct {
	name string
	run  func(k *Kernel, ctx context.Context, p *process, c *admitted) *Error
}

// admission is the pipeline up to tool_called, in DESIGN's order: projection/lookup
// → argument size → input schema → visibility and Skill gates → approval. Budget and
// tool_called follow in one batch (open), then the handler and the settlement.
var admission = []stage{
	{"lookup", (*Kernel).lookup},
	{"argument_size", (*Kernel).checkArgumentSize},
	{"input_schema", (*Kernel).checkInput},
	{"gate", (*Kernel).gate},
	{"approval", (*Kernel).approve},
}

// dispatch runs one normalised call through the pipeline: the admission stages, then
// open (budget and tool_called, written as durability decides), the handler and
// settle. Every path before open leaves a call_rejected event; every path after it
// settles the call exactly once.
func (k *Kernel) dispatch(ctx context.Context, p *process, req request) (*Result, error) {
	c := &admitted{req: &req}
	for _, s := range admission {
		if err := s.run(k, ctx, p, c); err != nil {
			return nil, k.rejectCall(ctx, p, &req, err)
		}
	}
	call, err := k.open(ctx, p, c)
	if err != nil {
		return nil, err
	}
	// From here the call is open: every path settles it, whatever happens to ctx.
	settleCtx := context.WithoutCancel(ctx)
	// What the handler deferred is started while the settlement syncs (settle), and at
	// the latest here, on every path.
	defer call.runDeferred()
	out, herr := runHandler(ctx, c.e.Handler, call)
	if herr != nil {
		return nil, k.fail(settleCtx, p, call, FailedInHandler, herr)
	}
	return k.settle(settleCtx, p, call, c.e, out)
}

// lookup is projection and lookup: the process must be running, and the name must be
// in its projection (a JIT name called directly in multiplexed mode reads exactly like
// an unknown one; run_jit_tool is a name only there).
func (k *Kernel) lookup(_ context.Context, p *process, c *admitted) *Error {
	req := c.req
	p.mu.RLock()
	proj, state := p.projection, p.state
	e := p.tools[req.name]
	p.mu.RUnlock()
	c.proj = proj
	if state != StateRunning {
		return &Error{Layer: layer, Code: CodeProcessPaused, Message: fmt.Sprintf("process %s is %s: the operator must resume it", p.pid, state)}
	}
	switch {
	case req.name == RunJITTool && req.via == viaModel && proj == Multiplexed:
		c.mux = true
		return nil
	case req.name == RunJITTool && req.via == viaHost:
		return &Error{Layer: layer, Code: CodeUnknownTool, Message: RunJITTool + " is not a process tool: it only routes model calls in the multiplexed projection and cannot be called through the host API"}
	case e == nil:
		return unknownTool(req.name)
	case e.Kind == KindJIT && req.via == viaModel && proj == Multiplexed:
		// Hidden: in multiplexed mode JIT tools are reached only through run_jit_tool,
		// and the refusal reads exactly like an unknown name.
		return unknownTool(req.name)
	}
	c.e = e
	return nil
}

// checkArgumentSize applies the argument size limit to the raw arguments.
func (k *Kernel) checkArgumentSize(_ context.Context, p *process, c *admitted) *Error {
	if c.req.argBytes > p.limits.MaxArgumentBytes {
		return &Error{Layer: layer, Code: CodeLimitExceeded,
			Message: fmt.Sprintf("arguments of %s are %d bytes, more than the %d-byte argument limit", c.req.name, c.req.argBytes, p.limits.MaxArgumentBytes)}
	}
	return nil
}

// checkInput validates the arguments against the tool's input schema, before anything
// runs. For run_jit_tool it checks the envelope first and resolves the JIT tool it
// names, whose schema then checks the nested arguments.
func (k *Kernel) checkInput(_ context.Context, p *process, c *admitted) *Error {
	c.args = c.req.args
	if c.mux {
		name, nested, details := muxEnvelope(&c.args)
		if details != nil {
			return &Error{Layer: layer, Code: CodeSchemaInvalid, Details: details,
				Message: RunJITTool + ` arguments must be exactly {"tool_name": string, "arguments": object}: ` + liberr.DescribeDetails(details)}
		}
		p.mu.RLock()
		e := p.tools[name]
		p.mu.RUnlock()
		if e == nil || e.Kind != KindJIT {
			return &Error{Layer: layer, Code: CodeUnknownTool, Message: fmt.Sprintf("%s: no JIT tool named %q in this process", RunJITTool, name)}
		}
		c.e, c.args = e, nested
	}
	if details := validate(c.e.in, c.e.inPlain, &c.args); details != nil {
		return &Error{Layer: layer, Code: CodeSchemaInvalid, Details: details,
			Message: fmt.Sprintf("arguments of %s do not match its input schema: %s", c.e.Name, liberr.DescribeDetails(details))}
	}
	return nil
}

// gate is the visibility gate, then the Skill gate: while Skills are active, a call
// from the model (or a tools.call its tools make) reaches only the base tools and the
// active Skills' allowed-tools.
func (k *Kernel) gate(_ context.Context, p *process, c *admitted) *Error {
	p.mu.RLock()
	allowed := p.allowed
	gated := allowed != nil && !allowed[c.e.Name]
	skillOK, why := true, ""
	if c.req.via == viaModel || c.req.depth > 0 {
		skillOK, why = p.skillAllows(c.e)
	}
	p.mu.RUnlock()
	if gated {
		return &Error{Layer: layer, Code: CodeNotAllowed, Message: fmt.Sprintf("%s is not among the tools allowed in this process now", c.e.Name)}
	}
	if !skillOK {
		return &Error{Layer: layer, Code: CodeNotAllowed, Message: why}
	}
	return nil
}

// approve makes an operator-class tool (an image tool the policy names, or any JIT
// tool under approvals.jit_tools) wait for a decision bound to these exact arguments
// and this exact tool definition.
func (k *Kernel) approve(ctx context.Context, p *process, c *admitted) *Error {
	if p.img.Approvals.ToolApproval(c.e.Name, c.e.Kind == KindJIT) != syscalls.ApprovalOperator {
		return nil
	}
	if _, aerr := k.awaitApproval(ctx, p, approvalSubject{kind: approvalTool, subject: c.e.Name, tool: c.e.Name, via: c.req.via, args: c.args.Canonical()}); aerr != nil {
		return aerr
	}
	return nil
}

// durability decides how the call's opening is written. tool_called is deferred: it
// is applied (and visible) now but synced only with the settlement, which is what the
// model is acknowledged with. The store's log survives a crash as a prefix, so
// anything this call writes later (a syscall's effect, the settlement) cannot survive
// without it, and a call whose settlement was lost is found open on rehydrate. A tool
// that reaches outside the libOS (Annotations.OpenWorld) has its tool_called synced
// before its handler runs, so that an effect the store cannot order is never without
// its record.
func (k *Kernel) durability(e *entry) func(ctx context.Context, fn func(tx *store.Tx) error) error {
	if e.Annotations.OpenWorld {
		return k.st.Update
	}
	return k.st.UpdateDeferred
}

// open charges the call to the process's budget and writes tool_called, in one batch
// written as durability decides, and returns the Call the handler gets. Over budget
// the call is rejected (call_rejected), and nothing is open.
func (k *Kernel) open(ctx context.Context, p *process, c *admitted) (*Call, error) {
	req, e := c.req, c.e
	call := &Call{
		PID: p.pid, CallID: newCallID(), Tool: e.Name, Kind: e.Kind, Action: req.name,
		Via: req.via, Projection: c.proj, Depth: req.depth, Capabilities: p.caps.Strings(),
		Sandbox: p.img.Limits.Sandbox, Value: c.args, k: k, p: p,
	}
	// The arguments were decoded within the process's depth bound, so Encode, which
	// parses nothing, always succeeds; Compact stays the answer should it not.
	if d, err := jsonexact.Encode(c.args, p.limits.MaxDepth); err == nil {
		call.Args, call.ArgsDoc = d.Bytes(), d
	} else {
		call.Args = c.args.Compact()
	}
	call.Syscalls = k.syscallCaller(p, call)
	calledData, err := calledDoc(call, c, e.ID, p.limits.MaxDepth)
	if err != nil {
		return nil, fmt.Errorf("engine: encode tool_called: %w", err)
	}
	overBudget := false
	err = k.durability(e)(ctx, func(tx *store.Tx) error {
		if p.limits.MaxCalls > 0 {
			if _, err := tx.Charge(p.pid, "tool_calls", 1, p.limits.MaxCalls); err != nil {
				overBudget = errors.Is(err, store.ErrLimitExceeded)
				return err
			}
		}
		_, err := tx.AppendDoc(p.pid, EventToolCalled, calledData)
		return err
	})
	if overBudget {
		return nil, k.rejectCall(ctx, p, req, &Error{Layer: layer, Code: CodeBudgetExceeded, Message: fmt.Sprintf("the process has used its budget of %d tool calls", p.limits.MaxCalls)})
	}
	if err != nil {
		return nil, &Error{Layer: layer, Code: storageCode(err), Message: "could not record tool_called: " + err.Error(), Err: err}
	}
	return call, nil
}

// settle checks the handler's result (size, exact JSON, output schema, normalised
// size) and persists the ToolResult with tool_result, synced: what the model is
// acknowledged with. Any failure settles the call as tool_failed instead.
func (k *Kernel) settle(ctx context.Context, p *process, call *Call, e *entry, out json.RawMessage) (*Result, error) {
	if len(out) > p.limits.MaxResultBytes {
		return nil, k.fail(ctx, p, call, FailedAtResult, &Error{Layer: layer, Code: CodeLimitExceeded,
			Message: fmt.Sprintf("result of %s is %d bytes, more than the %d-byte result limit; no result was persisted", e.Name, len(out), p.limits.MaxResultBytes)})
	}
	// A result the handler handed over as a Doc (Call.Return) is exact already: only
	// the kernel's tighter depth bound is left to check, and a Doc over it is parsed
	// so that the refusal reads as for any text.
	var v jsonexact.Value
	if d, ok := call.returned(out); ok && d.Depth() <= p.limits.MaxDepth {
		v = d.Value()
	} else {
		var derr error
		if v, derr = jsonexact.Decode(out, p.limits.MaxDepth); derr != nil {
			return nil, k.fail(ctx, p, call, FailedAtResult, &Error{Layer: layer, Code: CodeOutputInvalid, Message: fmt.Sprintf("result of %s is not exact JSON: %v", e.Name, derr), Err: derr})
		}
	}
	if e.out != nil {
		if details := validate(e.out, e.outPlain, &v); details != nil {
			return nil, k.fail(ctx, p, call, FailedAtResult, &Error{Layer: layer, Code: CodeOutputInvalid, Details: details,
				Message: fmt.Sprintf("result of %s does not match its output schema: %s", e.Name, liberr.DescribeDetails(details))})
		}
	}
	canon := v.Canonical()
	if len(canon) > p.limits.MaxResultBytes {
		return nil, k.fail(ctx, p, call, FailedAtResult, &Error{Layer: layer, Code: CodeLimitExceeded,
			Message: fmt.Sprintf("normalised result of %s is %d bytes, more than the %d-byte result limit; no result was persisted", e.Name, len(canon), p.limits.MaxResultBytes)})
	}
	sum := sha256.Sum256(canon)
	resultData, err := jsonexact.Encode(jsonexact.Obj(
		jsonexact.Member{Key: "call_id", Val: jsonexact.Str(call.CallID)},
		jsonexact.Member{Key: "result_bytes", Val: jsonexact.Int(int64(len(canon)))},
		jsonexact.Member{Key: "result_sha256", Val: jsonexact.Str(hex.EncodeToString(sum[:]))},
		jsonexact.Member{Key: "tool", Val: jsonexact.Str(e.Name)},
	), 0)
	if err != nil {
		return nil, k.fail(ctx, p, call, FailedAtResult, fmt.Errorf("engine: encode tool_result: %w", err))
	}
	res := &Result{PID: p.pid, CallID: call.CallID, Tool: e.Name, Structured: canon, Text: string(canon)}
	// The handler's deferred work (call.Defer) is started once the settlement is
	// applied, just before its sync is asked for, and runs while the disk syncs: the
	// answer waits for the sync, not for that work too.
	err = k.st.UpdateMeanwhile(ctx, func(tx *store.Tx) error {
		if err := tx.PutToolResult(store.ToolResult{PID: p.pid, CallID: call.CallID, Tool: e.Name, Structured: canon, Text: res.Text}); err != nil {
			return err
		}
		_, err := tx.AppendDoc(p.pid, EventToolResult, resultData)
		return err
	}, call.runDeferred)
	if err != nil {
		serr := &Error{Layer: layer, Code: storageCode(err), Message: "could not persist the result: " + err.Error(), Err: err}
		return nil, k.fail(ctx, p, call, FailedAtResult, serr)
	}
	return res, nil
}

// runHandler runs h, turning a panic into an error: the host survives every tool.
func runHandler(ctx context.Context, h Handler, call *Call) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Layer: layer, Code: CodeToolFailed, Message: fmt.Sprintf("%s panicked: %v", call.Tool, r)}
		}
	}()
	out, err = h(ctx, call)
	if err == nil && out == nil {
		err = &Error{Layer: layer, Code: CodeOutputInvalid, Message: call.Tool + " returned no result"}
	}
	return out, err
}

// The stages a tool_failed event names (its "stage" field): where the call failed,
// as data, so that a reader of the log (libos tape) never has to tell them apart by
// the reason's text.
const (
	// FailedInHandler: the handler (a JIT tool's program) returned the error.
	FailedInHandler = "handler"
	// FailedAtResult: the handler returned a result, and the kernel's checks of it
	// (result limit, exact JSON, output schema) or its persistence refused it.
	FailedAtResult = "result"
)

// fail settles an open call with tool_failed carrying err's code and the stage it
// failed at, and returns err as an *Error. The code is the outermost one in err's chain: a handler's typed error
// that wraps an *Error (a nested call's unknown_tool under the handler's own
// capability_denied, say) reports its own code, not the one it wraps. If even the
// settlement cannot be recorded the call stays open and is reported as unknown
// settlement when the kernel is reopened.
func (k *Kernel) fail(ctx context.Context, p *process, call *Call, stage string, err error) error {
	e := liberr.Outermost(err)
	if e == nil || toolsOwn[e.Layer] {
		code := liberr.CodeOr(err, CodeToolFailed)
		if e != nil && !toolsOwnCodes[e.Layer] {
			code = CodeToolFailed
		}
		e = &Error{Layer: layer, Code: code, Message: fmt.Sprintf("%s failed: %v", call.Tool, err), Err: err}
	}
	data, derr := failedDoc(call, stage, e)
	if derr != nil {
		return &Error{Layer: layer, Code: CodeStorage, Message: "could not settle the failed call: " + derr.Error(), Err: errors.Join(e, derr)}
	}
	if _, serr := k.st.AppendDoc(ctx, p.pid, EventToolFailed, data); serr != nil {
		return &Error{Layer: layer, Code: storageCode(serr), Message: "could not settle the failed call: " + serr.Error(), Err: errors.Join(e, serr)}
	}
	return e
}

// calledDoc is the data of a call's tool_called event, built from the arguments the
// adapter decoded (so neither the kernel nor the store parses them again). Members
// are in key order.
func calledDoc(call *Call, c *admitted, toolID string, maxDepth int) (jsonexact.Doc, error) {
	req := c.req
	ms := make([]jsonexact.Member, 0, 10)
	add := func(k string, v jsonexact.Value) { ms = append(ms, jsonexact.Member{Key: k, Val: v}) }
	add("action", jsonexact.Str(req.name))
	add("arg_bytes", jsonexact.Int(int64(req.argBytes)))
	add("args", c.args)
	add("call_id", jsonexact.Str(call.CallID))
	if req.depth > 0 {
		add("depth", jsonexact.Int(int64(req.depth)))
	}
	add("kind", jsonexact.Str(string(call.Kind)))
	if req.fromAction {
		add("name_from", jsonexact.Str("action"))
	}
	add("tool", jsonexact.Str(call.Tool))
	if toolID != "" {
		add("tool_id", jsonexact.Str(toolID))
	}
	add("via", jsonexact.Str(req.via))
	// The arguments are nested one level below the event's object.
	return jsonexact.Encode(jsonexact.Obj(ms...), maxDepth+1)
}

// failedDoc is the data of a tool_failed event. Members are in key order.
func failedDoc(call *Call, stage string, e *Error) (jsonexact.Doc, error) {
	ms := make([]jsonexact.Member, 0, 6)
	add := func(k string, v jsonexact.Value) { ms = append(ms, jsonexact.Member{Key: k, Val: v}) }
	add("call_id", jsonexact.Str(call.CallID))
	add("code", jsonexact.Str(string(e.Code)))
	if len(e.Details) > 0 {
		ds := make([]jsonexact.Value, len(e.Details))
		for i, d := range e.Details {
			ds[i] = jsonexact.Obj(jsonexact.Member{Key: "path", Val: jsonexact.Str(d.Path)}, jsonexact.Member{Key: "message", Val: jsonexact.Str(d.Message)})
		}
		add("details", jsonexact.Value{Kind: jsonexact.Array, A: ds})
	}
	add("reason", jsonexact.Str(e.Message))
	add("stage", jsonexact.Str(stage))
	add("tool", jsonexact.Str(call.Tool))
	return jsonexact.Encode(jsonexact.Obj(ms...), 0)
}

// toolsOwn are the layers whose errors are a tool's own failure, not a refusal of the
// kernel or of a syscall: a handler's error from the tool's implementation (the JIT
// lifecycle and JIT programs), from the store or from the sandbox it used. The model
// sees such a failure framed with the tool's name ("<tool> failed: <error>"); an
// error of the kernel or of the syscall layer speaks for itself, as it is.
var toolsOwn = map[string]bool{"tools": true, "store": true, "wasm": true}

// toolsOwnCodes are the layers of toolsOwn whose codes the model sees: the tools
// layer's codes are part of the JIT contract; the store's and the sandbox's describe
// the host, and such a failure is tool_failed.
var toolsOwnCodes = map[string]bool{"tools": true}

// runJITToolDef is the multiplexed pseudo-function. Its schema names no JIT tool.
var runJITToolDef = render.Tool{
	Name: RunJITTool,
	Description: "Run a process-local JIT tool by its registered name. Call with exactly " +
		`{"tool_name": "<registered name>", "arguments": {…}}` + ": the field is tool_name, not name, and arguments must match that tool's input schema.",
	InputSchema: json.RawMessage(`{"additionalProperties":false,"properties":{"arguments":{"description":"The arguments object of the JIT tool, validated against its input schema.","type":"object"},"tool_name":{"description":"The registered name of the JIT tool.","type":"string"}},"required":["tool_name","arguments"],"type":"object"}`),
	Annotations: Annotations{Title: "Run a JIT tool", Destructive: true, OpenWorld: false},
}

// muxEnvelope checks run_jit_tool's arguments: exactly {"tool_name": non-empty string,
// "arguments": object}. It returns the violations as data.
func muxEnvelope(args *jsonexact.Value) (string, jsonexact.Value, []Detail) {
	var details []Detail
	for _, m := range args.O {
		switch m.Key {
		case "tool_name", "arguments":
		case "name":
			details = append(details, Detail{Path: "/name", Message: `the field is "tool_name", not "name"`})
		default:
			details = append(details, Detail{Path: "/" + jsonexact.EscapePointer(m.Key), Message: `unexpected key: run_jit_tool takes only "tool_name" and "arguments"`})
		}
	}
	var name string
	switch tn, ok := args.Get("tool_name"); {
	case !ok:
		details = append(details, Detail{Path: "", Message: `missing required "tool_name"`})
	case tn.Kind != jsonexact.String || ToolName(tn.S) == "":
		details = append(details, Detail{Path: "/tool_name", Message: "must be a non-empty string"})
	default:
		name = ToolName(tn.S)
	}
	var nested jsonexact.Value
	switch a, ok := args.Get("arguments"); {
	case !ok:
		details = append(details, Detail{Path: "", Message: `missing required "arguments"`})
	case a.Kind != jsonexact.Object:
		details = append(details, Detail{Path: "/arguments", Message: "must be an object, got " + a.Kind.String()})
	default:
		nested = *a
	}
	return name, nested, details
}
