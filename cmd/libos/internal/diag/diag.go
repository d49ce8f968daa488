package diag

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Sentinel is the echo round-trip object: strings (with escapes and non-ASCII),
// numbers (2^53+1 among them, which a float64 round trip changes), booleans, null,
// lists and nested objects, with a nested "action" key (ordinary data, unlike the
// reserved top-level one, which the sentinel never uses).
const Sentinel = `{"probe":"libos-echo-roundtrip","text":"caf\u00e9 \"quoted\" \\ tab\t","numbers":{"zero":0,"negative":-7,"fraction":0.125,"exponent":1.5e300,"beyond_float64":9007199254740993},"flags":{"yes":true,"no":false},"nothing":null,"list":[1,"two",[3],{"four":4},[]],"nested":{"action":"nested keys named action are data","deeper":{"empty":{}}}}`

// NotTested are the layers an echo round trip says nothing about (from the Skill).
var NotTested = []string{
	"authorization, capabilities and approvals of real tools",
	"provider health, endpoint credentials, retries and idempotency",
	"application semantics and domain state of the real target tool",
	"JIT sandbox behaviour, syscalls and output-schema enforcement (unless --jit was given)",
	"frames that fail normalisation: no echo result exists for them",
	"unknown or hidden tool names (projection and tool-table failures)",
}

// Options select what to diagnose beyond echo.
type Options struct {
	// JIT is the registered name of a JIT tool to check after echo; empty skips it.
	JIT string
	// JITArgs is a small valid case for the JIT tool; nil means the arguments of the
	// first test of the candidate the tool was registered from.
	JITArgs json.RawMessage
	// JITInvalid is a case the JIT tool's input schema must reject; nil means JITArgs
	// plus an undeclared key, usable only when the schema's root is closed
	// (additionalProperties:false).
	JITInvalid json.RawMessage
	// Caller, when set, makes the echo call instead of handing the frame to the kernel
	// directly: the provider path, where a real model is asked to make the call and
	// chooses the function name and arguments itself. It returns what the model used
	// and what the kernel answered (res nil and err nil: the model made no call).
	Caller Caller
	// Path names the model-facing path in the report ("kernel" by default).
	Path string
}

// Caller makes one model-facing call meant as fn(args) and returns the function name
// and arguments actually sent, and the kernel's answer.
type Caller func(ctx context.Context, fn string, args json.RawMessage) (usedFn string, usedArgs json.RawMessage, res *engine.Result, err error)

// Failure is a call that did not produce a result.
type Failure struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details []engine.Detail `json:"details,omitempty"`
	// Stage is where it failed: "frame" (the adapter refused it; nothing was
	// dispatched), "before_execution" (refused before tool_called) or "execution"
	// (the tool ran, or was about to, and the call settled as failed).
	Stage string `json:"stage"`
}

// Call is the evidence of one model-facing call.
type Call struct {
	Function   string          `json:"function"`
	Arguments  json.RawMessage `json:"arguments"`
	Dispatched bool            `json:"dispatched"` // a tool_called event exists for it
	Tool       string          `json:"tool,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Failure    *Failure        `json:"failure,omitempty"`
	Events     []string        `json:"events"` // the event types the call appended, in order
}

// Check is one node of the expected-versus-observed comparison.
type Check struct {
	Path     string `json:"path"`
	Expected string `json:"expected_type"`
	Observed string `json:"observed_type"`
	OK       bool   `json:"ok"`
	Note     string `json:"note,omitempty"`
	// Shorter: the observed string, array or object has less in it than was sent.
	Shorter bool `json:"shorter,omitempty"`
}

// Limits is the size-limit status of the echo call.
type Limits struct {
	ArgumentBytes    int  `json:"argument_bytes"`
	MaxArgumentBytes int  `json:"max_argument_bytes"`
	ResultBytes      int  `json:"result_bytes"`
	MaxResultBytes   int  `json:"max_result_bytes"`
	Within           bool `json:"within_limits"`
	// Truncated: a value came back shorter than it was sent. The kernel fails an
	// oversized argument or result instead of cutting it, so this must stay false.
	Truncated bool `json:"truncated"`
}

// Echo is the echo part of the report.
type Echo struct {
	Call
	// ModelFaithful: on the provider path, the arguments the model sent are the
	// sentinel (types and nesting); always true on the kernel path.
	ModelFaithful bool    `json:"model_faithful"`
	Match         bool    `json:"match"`
	Comparison    []Check `json:"comparison"`
	Limits        Limits  `json:"limits"`
}

// JIT is the JIT part of the report.
type JIT struct {
	Name       string `json:"name"`
	Projection string `json:"projection"`
	Valid      Call   `json:"valid_case"`
	Invalid    Call   `json:"invalid_case"`
	// InvalidRejectedBeforeExecution: the invalid case failed with schema_invalid and
	// never reached tool_called.
	InvalidRejectedBeforeExecution bool `json:"invalid_rejected_before_execution"`
	OK                             bool `json:"ok"`
}

// Report is the whole diagnostic.
type Report struct {
	PID string `json:"pid"`
	// Path is the model-facing path the calls took: "kernel" (frames handed to the
	// kernel as a model's would be) or "provider:NAME" (a real model API).
	Path       string   `json:"path"`
	Projection string   `json:"projection"`
	OK         bool     `json:"ok"`
	Echo       Echo     `json:"echo"`
	JIT        *JIT     `json:"jit,omitempty"`
	NotTested  []string `json:"not_tested"`
}

// Run diagnoses process pid of k.
func Run(ctx context.Context, k *engine.Kernel, pid string, opts Options) (*Report, error) {
	info, err := k.Process(pid)
	if err != nil {
		return nil, err
	}
	r := &Report{PID: pid, Path: opts.Path, Projection: string(info.Projection), NotTested: NotTested}
	if r.Path == "" {
		r.Path = "kernel"
	}

	// Echo round trip.
	call, err := sendVia(ctx, k, pid, "echo", json.RawMessage(Sentinel), opts.Caller)
	if err != nil {
		return nil, err
	}
	r.Echo.Call = call
	r.Echo.ModelFaithful = true
	if opts.Caller != nil {
		_, r.Echo.ModelFaithful = Compare(json.RawMessage(Sentinel), call.Arguments)
	}
	r.Echo.Limits = Limits{
		ArgumentBytes:    compactLen(Sentinel),
		MaxArgumentBytes: info.Limits.MaxArgumentBytes,
		ResultBytes:      len(call.Result),
		MaxResultBytes:   info.Limits.MaxResultBytes,
	}
	r.Echo.Limits.Within = r.Echo.Limits.ArgumentBytes <= r.Echo.Limits.MaxArgumentBytes && r.Echo.Limits.ResultBytes <= r.Echo.Limits.MaxResultBytes
	if call.Result != nil {
		r.Echo.Comparison, r.Echo.Match = Compare(json.RawMessage(Sentinel), call.Result)
		for _, c := range r.Echo.Comparison {
			r.Echo.Limits.Truncated = r.Echo.Limits.Truncated || c.Shorter
		}
	}
	r.OK = call.Dispatched && call.Failure == nil && r.Echo.Match && r.Echo.Limits.Within && !r.Echo.Limits.Truncated

	if opts.JIT != "" {
		j, err := runJIT(ctx, k, pid, info, opts)
		if err != nil {
			return nil, err
		}
		r.JIT = j
		r.OK = r.OK && j.OK
	}
	return r, nil
}

func compactLen(s string) int {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return len(s)
	}
	return b.Len()
}

func runJIT(ctx context.Context, k *engine.Kernel, pid string, info engine.ProcessInfo, opts Options) (*JIT, error) {
	j := &JIT{Name: opts.JIT, Projection: string(info.Projection)}
	if kind, ok := info.Tools[opts.JIT]; !ok || kind != engine.KindJIT {
		return nil, fmt.Errorf("diag: process %s has no registered JIT tool %q", pid, opts.JIT)
	}
	cand, err := candidateOf(k, pid, opts.JIT)
	if err != nil {
		return nil, err
	}
	valid := opts.JITArgs
	if valid == nil {
		var tests []struct {
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(cand.Tests, &tests); err != nil || len(tests) == 0 || len(tests[0].Args) == 0 {
			return nil, fmt.Errorf("diag: %s has no test to take a valid case from: pass --jit-args", opts.JIT)
		}
		valid = tests[0].Args
	}
	invalid := opts.JITInvalid
	if invalid == nil {
		var root struct {
			AdditionalProperties *bool `json:"additionalProperties"`
		}
		_ = json.Unmarshal(cand.InputSchema, &root)
		if root.AdditionalProperties == nil || *root.AdditionalProperties {
			return nil, fmt.Errorf("diag: the input schema of %s is not closed (additionalProperties:false), so no invalid case can be derived: pass --jit-invalid", opts.JIT)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(valid, &obj); err != nil {
			return nil, fmt.Errorf("diag: the valid case of %s is not an object: %w", opts.JIT, err)
		}
		obj["libos_diagnose_undeclared"] = json.RawMessage(`true`)
		invalid, _ = json.Marshal(obj)
	}
	envelope := func(args json.RawMessage) (string, json.RawMessage) {
		if info.Projection == engine.Multiplexed {
			name, _ := json.Marshal(opts.JIT)
			return engine.RunJITTool, json.RawMessage(`{"tool_name":` + string(name) + `,"arguments":` + string(args) + `}`)
		}
		return opts.JIT, args
	}
	fn, args := envelope(valid)
	if j.Valid, err = send(ctx, k, pid, fn, args); err != nil {
		return nil, err
	}
	fn, args = envelope(invalid)
	if j.Invalid, err = send(ctx, k, pid, fn, args); err != nil {
		return nil, err
	}
	j.InvalidRejectedBeforeExecution = !j.Invalid.Dispatched && j.Invalid.Failure != nil &&
		j.Invalid.Failure.Code == string(engine.CodeSchemaInvalid) && j.Invalid.Failure.Stage == "before_execution"
	j.OK = j.Valid.Dispatched && j.Valid.Failure == nil && j.InvalidRejectedBeforeExecution
	return j, nil
}

// send makes one model-facing call and collects its evidence from the event log.
func send(ctx context.Context, k *engine.Kernel, pid, fn string, args json.RawMessage) (Call, error) {
	return sendVia(ctx, k, pid, fn, args, nil)
}

// sendVia is send through caller (nil: the frame straight to the kernel).
func sendVia(ctx context.Context, k *engine.Kernel, pid, fn string, args json.RawMessage, caller Caller) (Call, error) {
	c := Call{Function: fn, Arguments: args, Events: []string{}}
	head, err := lastSeq(k, pid)
	if err != nil {
		return c, err
	}
	var res *engine.Result
	var callErr error
	if caller == nil {
		name, _ := json.Marshal(fn)
		frame := []byte(`{"name":` + string(name) + `,"arguments":` + string(args) + `}`)
		res, callErr = k.HandleFrame(ctx, pid, frame)
	} else {
		c.Function, c.Arguments, res, callErr = caller(ctx, fn, args)
		if res == nil && callErr == nil {
			c.Failure = &Failure{Code: "no_tool_call", Message: "the model answered without calling the tool", Stage: "model"}
			return c, nil
		}
	}
	evs, err := k.Events(pid, head, store.MaxPage)
	if err != nil {
		return c, err
	}
	var dispatched bool
	for _, ev := range evs {
		c.Events = append(c.Events, ev.Type)
		if ev.Type == store.EventToolCalled {
			var d struct {
				Tool string `json:"tool"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			c.CallID, c.Tool = ev.CallID, d.Tool
			dispatched = true
		}
	}
	c.Dispatched = dispatched
	if callErr != nil {
		f := &Failure{Code: string(liberr.CodeOr(callErr, liberr.CodeToolFailed)), Message: callErr.Error()}
		var e *engine.Error
		if errors.As(callErr, &e) {
			f.Message, f.Details = e.Message, e.Details
		}
		switch {
		case slicesContains(c.Events, engine.EventProtocolRejected):
			f.Stage = "frame"
		case dispatched:
			f.Stage = "execution"
		default:
			f.Stage = "before_execution"
		}
		c.Failure = f
		return c, nil
	}
	c.Result, c.CallID, c.Tool = res.Structured, res.CallID, res.Tool
	return c, nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Compare compares two JSON values semantically: types and nesting, object members
// regardless of order, numbers by exact value (1.0 equals 1, 2^53+1 differs from
// 2^53), strings by their decoded text. It returns one check per node, in a stable
// order, and whether every node matched.
func Compare(expected, observed json.RawMessage) ([]Check, bool) {
	ev, err1 := jsonexact.DecodeAny(expected, 0)
	ov, err2 := jsonexact.DecodeAny(observed, 0)
	if err1 != nil || err2 != nil {
		return []Check{{Path: "/", Expected: jsonexact.KindOf(ev), Observed: jsonexact.KindOf(ov), Note: "not JSON"}}, false
	}
	var out []Check
	compare("", ev, ov, &out)
	ok := true
	for _, c := range out {
		ok = ok && c.OK
	}
	return out, ok
}

func compare(path string, e, o any, out *[]Check) {
	p := path
	if p == "" {
		p = "/"
	}
	c := Check{Path: p, Expected: jsonexact.KindOf(e), Observed: jsonexact.KindOf(o)}
	if c.Expected != c.Observed {
		c.Note = "type differs"
		*out = append(*out, c)
		return
	}
	switch ev := e.(type) {
	case map[string]any:
		ov := o.(map[string]any)
		keys := map[string]bool{}
		for k := range ev {
			keys[k] = true
		}
		for k := range ov {
			keys[k] = true
		}
		c.OK = len(ev) == len(ov)
		if !c.OK {
			c.Note = fmt.Sprintf("%d members sent, %d returned", len(ev), len(ov))
			c.Shorter = len(ov) < len(ev)
		}
		*out = append(*out, c)
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			sub := path + "/" + jsonexact.EscapePointer(k)
			ex, inE := ev[k]
			ob, inO := ov[k]
			switch {
			case !inO:
				*out = append(*out, Check{Path: sub, Expected: jsonexact.KindOf(ex), Observed: "missing", Note: "member lost"})
			case !inE:
				*out = append(*out, Check{Path: sub, Expected: "missing", Observed: jsonexact.KindOf(ob), Note: "member added"})
			default:
				compare(sub, ex, ob, out)
			}
		}
	case []any:
		ov := o.([]any)
		c.OK = len(ev) == len(ov)
		if !c.OK {
			c.Note = fmt.Sprintf("%d elements sent, %d returned", len(ev), len(ov))
			c.Shorter = len(ov) < len(ev)
		}
		*out = append(*out, c)
		for i := 0; i < len(ev) && i < len(ov); i++ {
			compare(fmt.Sprintf("%s/%d", path, i), ev[i], ov[i], out)
		}
	case json.Number:
		on := o.(json.Number)
		c.OK = jsonexact.NumberEqual(string(ev), string(on))
		if !c.OK {
			c.Note = fmt.Sprintf("sent %s, returned %s", ev, on)
		}
		*out = append(*out, c)
	case string:
		c.OK = ev == o.(string)
		if !c.OK {
			c.Note = fmt.Sprintf("sent %q, returned %q", ev, o)
			c.Shorter = len(o.(string)) < len(ev)
		}
		*out = append(*out, c)
	case bool:
		c.OK = ev == o.(bool)
		if !c.OK {
			c.Note = fmt.Sprintf("sent %v, returned %v", ev, o)
		}
		*out = append(*out, c)
	case nil:
		c.OK = true
		*out = append(*out, c)
	}
}

// candidateOf is the registered candidate behind JIT tool name of pid; a fork's
// binding names the process that owns the candidate.
func candidateOf(k *engine.Kernel, pid, name string) (store.Candidate, error) {
	bs, err := k.Bindings(pid)
	if err != nil {
		return store.Candidate{}, fmt.Errorf("diag: the bindings of %s: %w", pid, err)
	}
	for _, b := range bs {
		if b.Name != name {
			continue
		}
		owner := b.CandidatePID
		if owner == "" {
			owner = pid
		}
		cs, err := k.Candidates(owner)
		if err != nil {
			return store.Candidate{}, fmt.Errorf("diag: the candidates of %s: %w", owner, err)
		}
		for _, c := range cs {
			if c.ID == b.CandidateID {
				return c, nil
			}
		}
		return store.Candidate{}, fmt.Errorf("diag: the candidate %s of %s is not in the store", b.CandidateID, name)
	}
	return store.Candidate{}, fmt.Errorf("diag: process %s has no binding for %s", pid, name)
}

// lastSeq is the sequence number of pid's last event (0 for an empty log), read
// through the kernel page by page.
func lastSeq(k *engine.Kernel, pid string) (uint64, error) {
	var last uint64
	for {
		evs, err := k.Events(pid, last, store.MaxPage)
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			return last, nil
		}
		last = evs[len(evs)-1].Seq
	}
}
