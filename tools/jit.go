package tools

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/internal/randid"
	"github.com/agentlibos/libos/jsbundle"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/wasm"
)

// Names of the JIT lifecycle tools.
const (
	ProposeName  = "propose_jit_tool"
	ValidateName = "validate_jit_tool"
	RegisterName = "register_jit_tool"
)

// ScopeEphemeralProcess is the one registration scope: the binding belongs to the
// registering process. Committed bindings come back when the kernel is reopened; a
// fork of a checkpoint is a new process with new identities.
const ScopeEphemeralProcess = "ephemeral_process"

// Candidate states in the store.
const (
	StateProposed   = "proposed"
	StateValidated  = "validated"
	StateRejected   = "rejected"
	StateRegistered = "registered"
)

// Events the JIT lifecycle writes to the process's log, each in the same atomic batch
// as the state it records.
const (
	EventJITProposed   = "jit_proposed"
	EventJITValidated  = "jit_validated"
	EventJITRegistered = "jit_registered"
	// EventJITRehydrated was written by earlier versions when a second wiring
	// installed a committed binding again. It is no longer written (the kernel
	// records a rehydrated binding as tools_changed with change "rehydrated"); logs
	// that hold it still read and verify, like any event.
	EventJITRehydrated = "jit_rehydrated"
)

// Config configures the JIT lifecycle.
type Config struct {
	// Store keeps candidates, validation records, bindings and lifecycle events.
	// Required; it must be the kernel's store.
	Store *store.Store
	// Sandbox runs tests and JIT tool calls. Required.
	Sandbox *wasm.Engine
	// Router runs the syscalls of JIT tool calls. Nil means a router on Store with the
	// system clock and default bounds.
	Router *syscalls.Router
	// Limits bound proposals; zero fields default (see Limits).
	Limits Limits
	// Validation configures validation runs; its Limits field is replaced by Limits.
	Validation ValidatorConfig
	// Run bounds each JIT tool call in the sandbox; zero fields are the sandbox's
	// defaults.
	Run wasm.Limits
	// Authority builds the syscall authority of a JIT tool call. Nil means the
	// kernel's: call.Syscalls (the process's live capabilities, the kernel as
	// approver, the image's route policy and budgets, tools.call, the call's depth).
	Authority func(call *engine.Call) syscalls.Caller
}

// JIT is the JIT tool lifecycle: the three built-in tools and the call path of the
// tools they register. Make it with NewJIT and hand it to engine.Open: Tools() as
// built-ins and the JIT itself as engine.Config.JIT, the one loader through which the
// kernel rehydrates and forks bindings. It keeps no kernel: a call hands its handler
// its syscall authority (engine.Call.Syscalls) and, for register, the kernel running it
// (engine.Call.ToolKinds, InstallTool).
type JIT struct {
	st        *store.Store
	sandbox   *wasm.Engine
	router    *syscalls.Router
	limits    Limits
	validator *Validator
	run       wasm.Limits
	authority func(call *engine.Call) syscalls.Caller
}

// NewJIT checks cfg and returns the lifecycle.
func NewJIT(cfg Config) (*JIT, error) {
	if cfg.Store == nil || cfg.Sandbox == nil {
		return nil, errorf(CodeInvalidRequest, "jit: Config.Store and Config.Sandbox are required")
	}
	r := cfg.Router
	if r == nil {
		var err error
		if r, err = syscalls.NewRouter(syscalls.RouterConfig{Store: cfg.Store}); err != nil {
			return nil, fmt.Errorf("tools: jit: %w", err)
		}
	}
	vc := cfg.Validation
	vc.Limits = cfg.Limits
	return &JIT{
		st: cfg.Store, sandbox: cfg.Sandbox, router: r, limits: cfg.Limits.withDefaults(),
		validator: NewValidator(cfg.Sandbox, vc), run: cfg.Run, authority: cfg.Authority,
	}, nil
}

// Validator is the validator the lifecycle uses.
func (j *JIT) Validator() *Validator { return j.validator }

// Tools returns propose_jit_tool, validate_jit_tool and register_jit_tool, for
// engine.Config.Builtins. A process has them when its ProcessConfig.Tools names them.
func (j *JIT) Tools() []engine.Tool {
	return []engine.Tool{
		{
			Name: ProposeName,
			Description: "Propose a process-local TypeScript tool: name, description, source_code (export function run(args, libos)), " +
				"input_schema, output_schema and tests [{args, expected, syscalls}]. Checks name, sizes, schemas and test shapes; " +
				"does not compile or run the source. Returns the candidate_id, which belongs to this process. Durable and audited.",
			InputSchema:  json.RawMessage(proposeInput),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"candidate_id":{"type":"string","pattern":"^tcand_[0-9a-f]{32}$"}},"required":["candidate_id"],"additionalProperties":false}`),
			Annotations:  engine.Annotations{Title: "Propose a JIT tool"},
			Kind:         engine.KindBuiltin,
			Handler:      j.propose,
		},
		{
			Name: ValidateName,
			Description: "Validate a proposed candidate once: static checks, schema portability warnings, and every test in the sandbox " +
				"under its syscall tape. Returns {ok, errors, warnings, logs, tests, validated_at} and records it; the candidate " +
				"becomes validated or rejected. A settled candidate is not validated again.",
			InputSchema:  json.RawMessage(candidateIDInput),
			OutputSchema: json.RawMessage(reportOutput),
			Annotations:  engine.Annotations{Title: "Validate a JIT tool candidate"},
			Kind:         engine.KindBuiltin,
			Handler:      j.validate,
		},
		{
			Name: RegisterName,
			Description: "Register a validated candidate (a proposed one is validated first) as a tool of this process with scope " +
				"ephemeral_process. Returns {tool_id, name, scope}. Grants no capability; refuses rejected, registered, foreign " +
				"or unknown candidates and any name already in the process.",
			InputSchema:  json.RawMessage(candidateIDInput),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"tool_id":{"type":"string","pattern":"^tool_[0-9a-f]{32}$"},"name":{"type":"string"},"scope":{"const":"ephemeral_process"}},"required":["tool_id","name","scope"],"additionalProperties":false}`),
			Annotations:  engine.Annotations{Title: "Register a JIT tool"},
			Kind:         engine.KindBuiltin,
			Handler:      j.register,
		},
	}
}

const proposeInput = `{"type":"object","properties":{
"name":{"type":"string","description":"^[A-Za-z0-9_-]{1,64}$, not a process tool, never run_jit_tool"},
"description":{"type":"string"},
"source_code":{"type":"string","description":"TypeScript exporting function run(args, libos)"},
"input_schema":{"type":"object"},
"output_schema":{"type":"object"},
"tests":{"type":"array","items":{"type":"object"}}},
"required":["name","description","source_code","input_schema","output_schema","tests"],"additionalProperties":false}`

const candidateIDInput = `{"type":"object","properties":{"candidate_id":{"type":"string"}},"required":["candidate_id"],"additionalProperties":false}`

const reportOutput = `{"type":"object","properties":{
"ok":{"type":"boolean"},"errors":{"type":"array"},"warnings":{"type":"array"},"logs":{"type":"array"},
"tests":{"type":"array"},"validated_at":{"type":"string"}},
"required":["ok","errors","warnings","logs","tests","validated_at"],"additionalProperties":false}`

// newID makes the lifecycle's IDs (candidates, tools).
var newID = randid.New

// argsValue is the call's arguments as the adapter decoded them (engine.Call.Value),
// or, for a Call made outside the kernel's pipeline, Args decoded here.
func argsValue(call *engine.Call) (jsonexact.Value, error) {
	if call.Value.Kind == jsonexact.Object {
		return call.Value, nil
	}
	return jsonexact.Decode(call.Args, 0)
}

// decodeArgs reads a call's arguments, as the adapter decoded them once, into a map,
// refusing unknown and missing fields.
func decodeArgs(call *engine.Call, fields []string) (map[string]any, error) {
	v, err := argsValue(call)
	if err != nil {
		return nil, errorf(CodeInvalidRequest, "arguments are not exact JSON: %v", err)
	}
	obj, ok := v.ToAny().(map[string]any)
	if !ok {
		return nil, errorf(CodeInvalidRequest, "arguments must be a JSON object")
	}
	if err := exactFields(obj, fields, fields); err != nil {
		return nil, err
	}
	return obj, nil
}

// nameTaken reports why name cannot be a new tool of the calling process, or "".
func (j *JIT) nameTaken(call *engine.Call, name string) (string, error) {
	table, err := call.ToolKinds()
	if err != nil {
		return "", err
	}
	if kind, ok := table[name]; ok {
		return fmt.Sprintf("%q is already a %s tool of this process", name, kind), nil
	}
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if engine.SameToolName(n, name) {
			if table[n] == engine.KindJIT {
				// A multiplexed process hides its JIT tools' names from the model: the
				// refusal says there is one, not how it is spelled.
				if call.Projection == engine.Multiplexed {
					return fmt.Sprintf("%q is a jit tool of this process under case folding", name), nil
				}
			}
			return fmt.Sprintf("%q is the %s tool %q of this process under case folding", name, table[n], n), nil
		}
	}
	if _, err := j.st.Binding(call.PID, name); err == nil {
		return fmt.Sprintf("%q is already bound in this process", name), nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", storageErr("read binding", err)
	}
	return "", nil
}

// propose is propose_jit_tool.
func (j *JIT) propose(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
	v, err := argsValue(call)
	if err != nil {
		return nil, errorf(CodeInvalidRequest, "the proposal is not exact JSON: %v", err)
	}
	c, err := candidateOf(v, call.Args)
	if err != nil {
		return nil, err
	}
	if _, perr := checkProposal(c, j.limits); perr != nil {
		return nil, perr
	}
	why, err := j.nameTaken(call, c.Name)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, errorf(CodeNameConflict, "%s; choose a name for a genuinely distinct contract (there is no replacement)", why)
	}
	id := newID("tcand_")
	// The digests of the source and the schemas, as stored, are in the hash-chained
	// log: a replay holds the stored candidate to them.
	data, _ := json.Marshal(map[string]any{
		"candidate_id": id, "name": c.Name, "source_sha256": sha256Hex([]byte(c.SourceCode)),
		"source_bytes": len(c.SourceCode), "tests": testCount(c.Tests),
		"input_schema_sha256": sha256Hex(c.InputSchema), "output_schema_sha256": sha256Hex(c.OutputSchema),
	})
	// Deferred: durable with the call's settlement, which the kernel syncs before the
	// model sees the candidate ID (the store's log is one ordered prefix).
	err = j.st.UpdateDeferred(ctx, func(tx *store.Tx) error {
		if err := tx.CreateCandidate(store.Candidate{
			ID: id, PID: call.PID, Name: c.Name, Description: c.Description, SourceCode: c.SourceCode,
			InputSchema: c.InputSchema, OutputSchema: c.OutputSchema, Tests: c.Tests, State: StateProposed,
		}); err != nil {
			return err
		}
		_, err := tx.Append(call.PID, EventJITProposed, data)
		return err
	})
	if err != nil {
		return nil, storageErr("persist the candidate", err)
	}
	return json.Marshal(map[string]string{"candidate_id": id})
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func testCount(tests json.RawMessage) int {
	var items []json.RawMessage
	_ = json.Unmarshal(tests, &items)
	return len(items)
}

// candidate loads id for pid. Missing, malformed, unknown and other processes'
// candidates are the same not_found: the answer reveals nothing.
func (j *JIT) candidate(r interface {
	Candidate(pid, id string) (store.Candidate, error)
}, pid, id string) (store.Candidate, error) {
	notFound := &Error{Layer: layer, Code: CodeNotFound, Err: &CandidateRef{ID: id}, Message: fmt.Sprintf("no candidate %q in this process", liberr.Clip(id, 80))}
	if !strings.HasPrefix(id, "tcand_") || len(id) != len("tcand_")+32 {
		return store.Candidate{}, notFound
	}
	c, err := r.Candidate(pid, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Candidate{}, notFound
	case err != nil:
		return store.Candidate{}, storageErr("read the candidate", err)
	}
	return c, nil
}

func candidateArg(call *engine.Call) (string, error) {
	obj, err := decodeArgs(call, []string{"candidate_id"})
	if err != nil {
		return "", err
	}
	id, ok := obj["candidate_id"].(string)
	if !ok {
		return "", errorf(CodeInvalidRequest, `"candidate_id" must be a string`)
	}
	return id, nil
}

// settled describes the recorded validation of a settled candidate.
func settled(c store.Candidate) string {
	if len(c.Validations) == 0 {
		return fmt.Sprintf("candidate %s is %s", c.ID, c.State)
	}
	last := c.Validations[len(c.Validations)-1]
	var errs []Diagnostic
	_ = json.Unmarshal(last.Errors, &errs)
	return fmt.Sprintf("candidate %s is %s: it was validated at %s with ok=%v and %d errors; that recorded result stands",
		c.ID, c.State, last.Finished.UTC().Format(time.RFC3339Nano), last.OK, len(errs))
}

// candidateOfCall reads the candidate_id argument of validate_jit_tool and
// register_jit_tool and loads that candidate of the calling process.
func (j *JIT) candidateOfCall(call *engine.Call) (string, store.Candidate, error) {
	id, err := candidateArg(call)
	if err != nil {
		return "", store.Candidate{}, err
	}
	c, err := j.candidate(j.st, call.PID, id)
	return id, c, err
}

// validate is validate_jit_tool.
func (j *JIT) validate(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
	id, c, err := j.candidateOfCall(call)
	if err != nil {
		return nil, err
	}
	if c.State == StateDiscarded {
		return nil, discarded(c)
	}
	if c.State != StateProposed {
		return nil, &Error{Layer: layer, Code: CodeAlreadySettled, Err: &CandidateRef{ID: id},
			Message: settled(c) + "; validation is not re-run: propose a corrected candidate instead"}
	}
	rep, err := j.validateAndRecord(ctx, call.PID, c, false)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rep)
}

// validateAndRecord validates c and persists the attempt, the state change and a
// jit_validated event in one batch. A candidate settled meanwhile by a concurrent call
// is refused, and this run's result is not recorded.
func (j *JIT) validateAndRecord(ctx context.Context, pid string, c store.Candidate, auto bool) (Report, error) {
	started := time.Now().UTC()
	rep := j.validator.Validate(ctx, Candidate{
		Name: c.Name, Description: c.Description, SourceCode: c.SourceCode,
		InputSchema: c.InputSchema, OutputSchema: c.OutputSchema, Tests: c.Tests,
	})
	if err := ctx.Err(); err != nil {
		// A cancelled validation is no verdict on the candidate: record nothing.
		return Report{}, &Error{Layer: layer, Code: CodeToolFailed, Message: "validation was cancelled; the candidate stays proposed", Err: &CandidateRef{ID: c.ID, Err: err}}
	}
	attempt, err := attemptOf(rep, started)
	if err != nil {
		return Report{}, err
	}
	state := StateRejected
	if rep.OK {
		state = StateValidated
	}
	passed := 0
	for _, t := range rep.Tests {
		if t.OK {
			passed++
		}
	}
	ev := map[string]any{"candidate_id": c.ID, "name": c.Name, "ok": rep.OK, "state": state,
		"errors": len(rep.Errors), "warnings": len(rep.Warnings), "tests": len(rep.Tests), "tests_passed": passed}
	if auto {
		ev["auto"] = true
	}
	if len(rep.Errors) > 0 {
		ev["first_error"] = rep.Errors[0].Code
	}
	data, _ := json.Marshal(ev)
	var refusal error
	// Deferred like the proposal: the settlement of this call (or of the register
	// call that auto-validates) is the synced write that acknowledges it.
	err = j.st.UpdateDeferred(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		cur, err := j.candidate(tx, pid, c.ID)
		if err != nil {
			return err
		}
		switch cur.State {
		case StateProposed:
		case StateDiscarded:
			refusal = discarded(cur)
			return refusal
		default:
			refusal = &Error{Layer: layer, Code: CodeAlreadySettled, Err: &CandidateRef{ID: c.ID}, Message: settled(cur) + "; validation is not re-run"}
			return refusal
		}
		cur.State = state
		cur.Validations = append(cur.Validations, attempt)
		if err := tx.PutCandidate(cur); err != nil {
			return err
		}
		_, err = tx.Append(pid, EventJITValidated, data)
		return err
	})
	if refusal != nil {
		return Report{}, refusal
	}
	if err != nil {
		if te, ok := own(err); ok {
			return Report{}, te
		}
		return Report{}, storageErr("persist the validation", err)
	}
	return rep, nil
}

func attemptOf(r Report, started time.Time) (store.ValidationAttempt, error) {
	enc := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		return b
	}
	return store.ValidationAttempt{
		OK: r.OK, Errors: enc(r.Errors), Warnings: enc(r.Warnings), Logs: enc(r.Logs), Tests: enc(r.Tests),
		Started: started, Finished: r.ValidatedAt,
	}, nil
}

// ReportOf rebuilds the Report of a recorded validation attempt.
func ReportOf(a store.ValidationAttempt) (Report, error) {
	r := Report{OK: a.OK, ValidatedAt: a.Finished}
	for _, f := range []struct {
		raw json.RawMessage
		dst any
	}{{a.Errors, &r.Errors}, {a.Warnings, &r.Warnings}, {a.Logs, &r.Logs}, {a.Tests, &r.Tests}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return Report{}, fmt.Errorf("tools: recorded validation: %w", err)
		}
	}
	return r, nil
}

// register is register_jit_tool.
func (j *JIT) register(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
	id, c, err := j.candidateOfCall(call)
	if err != nil {
		return nil, err
	}
	switch c.State {
	case StateRegistered:
		return nil, &Error{Layer: layer, Code: CodeAlreadyRegistered, Err: &CandidateRef{ID: id}, Message: settled(c) + "; a candidate is registered once"}
	case StateRejected:
		return nil, &Error{Layer: layer, Code: CodeCandidateRejected, Err: &CandidateRef{ID: id}, Message: settled(c) + "; only an ok validation is eligible: propose a corrected candidate"}
	case StateDiscarded:
		return nil, discarded(c)
	case StateProposed, StateValidated:
	default:
		return nil, errorf(CodeStorage, "candidate %s has unknown state %q", id, c.State)
	}
	// A collision is refused before any validation runs; InstallTool checks again
	// atomically with the write.
	if why, err := j.nameTaken(call, c.Name); err != nil {
		return nil, err
	} else if why != "" {
		return nil, &Error{Layer: layer, Code: CodeNameConflict, Err: &CandidateRef{ID: id}, Message: why + "; there is no replacement: stop, or propose a genuinely distinct contract under another name"}
	}
	if c.State == StateProposed {
		rep, err := j.validateAndRecord(ctx, call.PID, c, true)
		if err != nil {
			return nil, err
		}
		if !rep.OK {
			return nil, &Error{Layer: layer, Code: CodeValidationFailed, Err: &CandidateRef{ID: id, Report: &rep},
				Message: fmt.Sprintf("candidate %s was validated first and failed (now rejected; the diagnostics are recorded): %s", id, summary(rep))}
		}
	}
	b := store.Binding{PID: call.PID, Name: c.Name, ToolID: newID("tool_"), CandidateID: id, Scope: ScopeEphemeralProcess}
	tool, err := j.tool(c, b)
	if err != nil {
		return nil, err
	}
	data, _ := json.Marshal(map[string]any{"candidate_id": id, "tool_id": b.ToolID, "name": c.Name, "scope": b.Scope})
	var refusal error
	err = call.InstallTool(ctx, tool, func(tx *store.Tx) error {
		cur, err := j.candidate(tx, call.PID, id)
		if err != nil {
			return err
		}
		if cur.State != StateValidated {
			switch cur.State {
			case StateRegistered:
				refusal = &Error{Layer: layer, Code: CodeAlreadyRegistered, Err: &CandidateRef{ID: id}, Message: settled(cur)}
			case StateDiscarded:
				refusal = discarded(cur)
			default:
				refusal = &Error{Layer: layer, Code: CodeCandidateRejected, Err: &CandidateRef{ID: id}, Message: settled(cur)}
			}
			return refusal
		}
		cur.State = StateRegistered
		if err := tx.PutCandidate(cur); err != nil {
			return err
		}
		if err := tx.AddBinding(b); err != nil {
			return err
		}
		_, err = tx.Append(call.PID, EventJITRegistered, data)
		return err
	})
	switch {
	case refusal != nil && errors.Is(err, refusal):
		return nil, refusal
	// The kernel's error is not wrapped: the pipeline would take its code for ours.
	case errors.Is(err, engine.ErrToolConflict):
		return nil, &Error{Layer: layer, Code: CodeNameConflict, Err: &CandidateRef{ID: id},
			Message: fmt.Sprintf("%q is already a tool or binding of this process; there is no replacement", c.Name)}
	case err != nil:
		return nil, &Error{Layer: layer, Code: CodeStorage, Err: &CandidateRef{ID: id}, Message: "register: " + err.Error()}
	}
	return json.Marshal(struct {
		ToolID string `json:"tool_id"`
		Name   string `json:"name"`
		Scope  string `json:"scope"`
	}{b.ToolID, c.Name, b.Scope})
}

func summary(r Report) string {
	var parts []string
	for i, e := range r.Errors {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(r.Errors)-3))
			break
		}
		parts = append(parts, e.Code+": "+liberr.Clip(e.Message, 200))
	}
	return strings.Join(parts, "; ")
}

// tool builds the process tool of a registered candidate. Its program is compiled
// here, once, and kept by the handler.
func (j *JIT) tool(c store.Candidate, b store.Binding) (engine.Tool, error) {
	prog, diags := jsbundle.Compile(c.SourceCode, jsbundle.Options{MaxSourceBytes: j.limits.MaxSourceBytes})
	if prog == nil {
		msg := compileFailure("the source no longer compiles", diags)
		return engine.Tool{}, &Error{Layer: layer, Code: CodeToolFailed, Err: &CandidateRef{ID: c.ID}, Message: liberr.Clip(msg, MaxMessageBytes)}
	}
	return engine.Tool{
		Name:         c.Name,
		Description:  c.Description,
		InputSchema:  c.InputSchema,
		OutputSchema: c.OutputSchema,
		// Every JIT tool is conservatively side-effecting and non-idempotent: its
		// syscalls may write, and nothing proves otherwise. One whose source or test
		// tapes name a net.* route reaches outside the libOS: open world.
		Annotations: engine.Annotations{Title: c.Name, ReadOnly: false, Destructive: true, Idempotent: false, OpenWorld: reachesNet(c)},
		Kind:        engine.KindJIT,
		ID:          b.ToolID,
		Handler:     j.handler(prog.Source),
	}, nil
}

// CallSeed is the Math.random seed of JIT tool call callID: fresh for every call
// (call IDs carry 128 random bits) and recorded with it (the call ID is in the hash-
// chained tool_called event), so that a replay draws the same numbers. It is never 0,
// which would ask the sandbox for a random seed.
func CallSeed(callID string) uint64 {
	sum := sha256.Sum256([]byte("libos.seed.v1\x00" + callID))
	if s := binary.BigEndian.Uint64(sum[:8]); s != 0 {
		return s
	}
	return 1
}

// handler runs a registered JIT tool. The engine has already checked the arguments
// against the input schema (a schema-invalid call never gets here) and checks the
// result against the output schema afterwards; an output failure does not undo the
// syscalls, which the router has audited one by one.
func (j *JIT) handler(program string) engine.Handler {
	return func(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
		b := j.router.For(j.callerFor(call))
		// The sandbox has no ambient clock, in production as in validation: Date.now()
		// and new Date() throw ambient_clock, and the time reaches a tool only through
		// clock.now, which checks clock:now and is audited. Math.random is seeded afresh
		// for every call, from the call's ID, so that a replay draws the same numbers.
		// The instance's restore is left to the pipeline, which runs it while the
		// call's settlement syncs (engine.Call.Defer).
		opts := wasm.Options{Limits: j.runLimits(call.Sandbox), Seed: CallSeed(call.CallID), Defer: call.Defer}
		var res *wasm.Result
		var err error
		if !call.ArgsDoc.IsZero() {
			// Exact already (the kernel decoded them): not checked as JSON again.
			res, err = j.sandbox.RunDoc(ctx, program, call.ArgsDoc, b, opts)
		} else {
			res, err = j.sandbox.Run(ctx, program, call.Args, b, opts)
		}
		if err != nil {
			return nil, runError(call.Tool, err, b.Refusal())
		}
		// The model sink: a result that carries labels the image keeps from the model
		// is withheld, whatever the program did with the refusals it caught.
		if err := b.CheckResult(ctx); err != nil {
			var se *syscalls.Error
			code := Code(syscalls.CodeDataFlowDenied)
			if errors.As(err, &se) {
				code = Code(se.Code)
			}
			return nil, &Error{Layer: layer, Code: code, Message: call.Tool + ": " + syscallText(err), Err: err}
		}
		// The sandbox decoded the guest's output once, exactly, where it crossed the
		// boundary; the value goes on to settle without a second parse. Output that
		// is JSON but not exact (no Doc), or whose compact text is not the guest's,
		// goes as the guest wrote it, and settle judges it.
		if !res.Doc.IsZero() && res.Doc.Len() == len(res.Value) {
			return call.Return(res.Doc), nil
		}
		return res.Value, nil
	}
}

func (j *JIT) callerFor(call *engine.Call) syscalls.Caller {
	if j.authority != nil {
		return j.authority(call)
	}
	return call.Syscalls
}

// runLimits applies the image's sandbox bounds of a call over the configured ones;
// a bound can only tighten.
func (j *JIT) runLimits(s image.SandboxLimits) wasm.Limits {
	l := j.run
	if wt := s.WallTime(); wt > 0 && (l.WallTime <= 0 || wt < l.WallTime) {
		l.WallTime = wt
	}
	if m := s.MemoryBytes; m > 0 && (l.Memory <= 0 || m < l.Memory) {
		l.Memory = m
	}
	return l
}

// syscallText is what a syscall failure says without its layer's name: the Message
// of the syscalls error err is, else err's own text.
func syscallText(err error) string {
	if se, ok := err.(*syscalls.Error); ok && se.Layer == syscalls.Layer {
		return se.Message
	}
	return err.Error()
}

// runError turns a sandbox failure into the call's error. A js_error that is a refused
// syscall the program let escape keeps the refusal's code (capability_denied, …): the
// guest reports it by the error's identity (wasm.Fault.Refusal), never by its text.
// denied is the last refusal the host made in the call; its message, without the
// guest's "Error: " framing, is the one shown when its code is the one that escaped.
func runError(tool string, err error, denied *syscalls.Error) error {
	var we *wasm.Fault
	if !errors.As(err, &we) {
		return liberr.WrapQuoting(layer, CodeToolFailed, err, tool)
	}
	if we.Code == wasm.CodeJSError && we.Refusal != "" {
		what := we.Message
		if denied != nil && string(denied.Code) == we.Refusal {
			what = denied.Message
		}
		return &Error{Layer: layer, Code: Code(we.Refusal), Err: err,
			Message: fmt.Sprintf("%s: the program did not catch a refused syscall: %s", tool, liberr.Clip(what, MaxMessageBytes))}
	}
	msg := we.Message
	if we.Limit != "" {
		msg = we.Limit + ": " + msg
	}
	if we.Path != "" {
		msg += " (at " + we.Path + ")"
	}
	return &Error{Layer: layer, Code: Code(we.Code), Message: tool + ": " + liberr.Clip(msg, MaxMessageBytes), Err: err}
}

// LoadJIT rebuilds the process tool of committed binding b: the contract of its
// candidate (owned by b.CandidatePID, or b.PID when that is empty) and its program,
// compiled once more, behind a ready handler. It reads the store and writes nothing.
// It is the kernel's hook for rehydrate and fork (engine.Config.JIT), and the only
// way a committed binding becomes a tool again.
func (j *JIT) LoadJIT(ctx context.Context, b store.Binding) (engine.Tool, error) {
	owner := b.CandidatePID
	if owner == "" {
		owner = b.PID
	}
	c, err := j.st.Candidate(owner, b.CandidateID)
	if err != nil {
		return engine.Tool{}, storageErr(fmt.Sprintf("load %s: candidate %s of %s", b.Name, b.CandidateID, owner), err)
	}
	if c.Name != b.Name || c.State != StateRegistered {
		return engine.Tool{}, errorf(CodeStorage, "load %s: candidate %s is %q in state %s, not the registered %q", b.Name, b.CandidateID, c.Name, c.State, b.Name)
	}
	return j.tool(c, b)
}

// reachesNet reports whether candidate c may reach the network: its source or the
// syscall tapes of its tests name a net.* route (net:* capabilities). A route name can
// be computed at run time, so this reads the text conservatively: any mention counts.
func reachesNet(c store.Candidate) bool {
	return strings.Contains(c.SourceCode, "net.") || strings.Contains(string(c.Tests), `"net.`)
}
