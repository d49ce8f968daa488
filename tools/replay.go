package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/jsbundle"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/wasm"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Verdicts of a replay.
const (
	VerdictSame          = "same"
	VerdictDifferent     = "different"
	VerdictNotReplayable = "not_replayable"
)

// ReplayOptions configure Replay and ReplayAll.
type ReplayOptions struct {
	// Source, when set, is the TypeScript run instead of the registered tool's code:
	// the changed code whose effect on the stored calls is the question.
	Source string
	// OutputSchema, when set, replaces the registered tool's output schema.
	OutputSchema json.RawMessage
	// Tool, when set, keeps only calls of the tool with this name (ReplayAll).
	Tool string
	// Since, when set, keeps only calls opened at or after it (ReplayAll).
	Since time.Time
	// Limits bound each run in the sandbox; zero fields are the sandbox's defaults.
	Limits wasm.Limits
}

// Difference is the first point where a replay left the recorded call.
type Difference struct {
	// Kind is "result" (the returned value or error), "syscall_order" (another route,
	// or a syscall more or fewer) or "syscall_args" (the same route with other
	// arguments).
	Kind string `json:"kind"`
	// Syscall is the index of the syscall, for the syscall kinds.
	Syscall *int `json:"syscall,omitempty"`
	// Path is where two JSON values first differ ("$.timezone").
	Path string `json:"path,omitempty"`
	// What says what differs at Path ("expected \"UTC\", observed \"Europe/Paris\"").
	What string `json:"what,omitempty"`
	// Recorded and Replayed describe the two sides, as short text.
	Recorded string `json:"recorded"`
	Replayed string `json:"replayed"`
}

// ReplayResult is the verdict on one stored call.
type ReplayResult struct {
	PID     string      `json:"pid"`
	CallID  string      `json:"call_id"`
	Tool    string      `json:"tool"`
	Verdict string      `json:"verdict"`
	Diff    *Difference `json:"diff,omitempty"`
	// Reason says why the call is not replayable: the message of the refusal, whose
	// code is Code.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Text renders r as the report lines `libos replay` prints: one line with the
// verdict, then, for a difference, the diff. The same result renders to the same
// bytes on every machine.
func (r ReplayResult) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", r.CallID, r.Tool, r.Verdict)
	switch {
	case r.Verdict == VerdictNotReplayable:
		fmt.Fprintf(&b, ": %s: %s", r.Code, r.Reason)
	case r.Diff != nil:
		d := r.Diff
		b.WriteString("\n  ")
		if d.Syscall != nil {
			fmt.Fprintf(&b, "syscall %d ", *d.Syscall)
		}
		b.WriteString(map[string]string{"result": "result", "syscall_order": "order", "syscall_args": "arguments"}[d.Kind])
		if d.Path != "" && d.Path != "$" {
			b.WriteString(" at " + d.Path)
		}
		if d.What != "" {
			b.WriteString(": " + d.What)
		}
		fmt.Fprintf(&b, "\n  - %s\n  + %s", d.Recorded, d.Replayed)
	}
	return b.String()
}

// Summary counts verdicts: "N same, N different, N not replayable".
func Summary(rs []ReplayResult) string {
	n := map[string]int{}
	for _, r := range rs {
		n[r.Verdict]++
	}
	return fmt.Sprintf("%d same, %d different, %d not replayable", n[VerdictSame], n[VerdictDifferent], n[VerdictNotReplayable])
}

// Replay runs the code of settled JIT tool call callID of process pid again, in the
// sandbox, against the call's journal as a tape (no provider, capability or budget is
// consulted, nothing is written), with the call's own Math.random seed (and, as in
// production, no ambient clock), and compares: the syscalls the code makes (order and arguments) and
// what it returns (the value, or the code of the error the call failed with). The
// first difference is reported. A call that cannot be replayed is a result with
// verdict not_replayable and the refusal's code (journal_corrupt for a journal or
// stored result that does not match its events' digests). The error is for the store
// itself failing, for an unknown process or call (call_not_found), and for a log
// that does not verify (journal_corrupt): no verdict is read from an edited log.
func Replay(ctx context.Context, st *store.Store, sb *wasm.Engine, pid, callID string, opts ReplayOptions) (ReplayResult, error) {
	c, err := findCall(st, pid, callID)
	if err != nil {
		return ReplayResult{}, err
	}
	return newReplayer(st, sb, pid, opts).one(ctx, c)
}

// ReplayAll replays every JIT tool call of pid (of opts.Tool, opened at or after
// opts.Since, when set), in the order the calls were opened. Calls that are not
// settled count as not replayable.
func ReplayAll(ctx context.Context, st *store.Store, sb *wasm.Engine, pid string, opts ReplayOptions) ([]ReplayResult, error) {
	if err := openLog(st, pid); err != nil {
		return nil, err
	}
	cs, err := scanCalls(st, pid, nil)
	if err != nil {
		return nil, err
	}
	rp := newReplayer(st, sb, pid, opts)
	var out []ReplayResult
	for _, c := range cs {
		if c.kind != "jit" || (opts.Tool != "" && c.tool != opts.Tool) || (!opts.Since.IsZero() && c.time.Before(opts.Since)) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r, err := rp.one(ctx, c)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// replayer keeps the programs it compiled, by source, across the calls of one run.
type replayer struct {
	st    *store.Store
	sb    *wasm.Engine
	opts  ReplayOptions
	progs map[string]*compiled
	// pid is the replayed process, whose log is verified already; proposed keeps
	// the jit_proposed digests of each process whose log was read.
	pid      string
	proposed map[string]map[string]proposedDigests
}

type compiled struct {
	source string
	out    *jsonschema.Schema
	err    error
}

func newReplayer(st *store.Store, sb *wasm.Engine, pid string, opts ReplayOptions) *replayer {
	return &replayer{st: st, sb: sb, opts: opts, progs: map[string]*compiled{}, pid: pid, proposed: map[string]map[string]proposedDigests{}}
}

func notReplayable(c *storedCall, err error) ReplayResult {
	r := ReplayResult{PID: c.pid, CallID: c.id, Tool: c.tool, Verdict: VerdictNotReplayable, Code: string(CodeNotReplayable), Reason: err.Error()}
	if te, ok := own(err); ok {
		r.Code, r.Reason = string(te.Code), te.Message
	}
	return r
}

// program returns the code to replay c with: the options' source, or the code that
// made the call, the candidate c's tool ID was registered from (its jit_registered
// event, or the process_forked event of a fork), whether or not the tool is still
// bound: a revoked tool replays with its own code, and a later tool of the same name
// is never taken for it. The candidate's stored source must still have the digest
// its jit_proposed event carries.
func (rp *replayer) program(c *storedCall) (*compiled, error) {
	source, outSchema := rp.opts.Source, rp.opts.OutputSchema
	if source == "" {
		cand, err := rp.candidate(c)
		if err != nil {
			return nil, err
		}
		source = cand.SourceCode
		if outSchema == nil {
			outSchema = cand.OutputSchema
		}
	}
	k := source + "\x00" + string(outSchema)
	if p, ok := rp.progs[k]; ok {
		return p, p.err
	}
	p := &compiled{}
	rp.progs[k] = p
	prog, diags := jsbundle.Compile(source, jsbundle.Options{})
	if prog == nil {
		msg := compileFailure("the code no longer compiles", diags)
		p.err = errorf(CodeNotReplayable, "%s", liberr.Clip(msg, MaxMessageBytes))
		return p, p.err
	}
	p.source = prog.Source
	if len(outSchema) > 0 {
		s, _, serr := compileSchema("output_schema", outSchema, Limits{}.withDefaults())
		if serr != nil {
			p.err = errorf(CodeNotReplayable, "%s", serr.Message)
			return p, p.err
		}
		p.out = s
	}
	return p, nil
}

// candidate returns the candidate whose code made call c, checked against the digests
// of its jit_proposed event.
func (rp *replayer) candidate(c *storedCall) (store.Candidate, error) {
	o := c.origin
	if o.candidateID == "" {
		return store.Candidate{}, errorf(CodeNotReplayable, "no jit_registered event of process %s names tool %s of %s: its code is not known", c.pid, c.toolID, c.tool)
	}
	cand, err := rp.st.Candidate(o.candidatePID, o.candidateID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Candidate{}, errorf(CodeNotReplayable, "the candidate %s of %s is not in the store", o.candidateID, c.tool)
	case errors.Is(err, store.ErrCorrupt):
		return store.Candidate{}, &Error{Layer: layer, Code: CodeJournalCorrupt, Err: err, Message: fmt.Sprintf("the candidate %s of %s does not decode", o.candidateID, c.tool)}
	case err != nil:
		return store.Candidate{}, storageErr("read the candidate "+o.candidateID, err)
	}
	digests, err := rp.proposals(o.candidatePID)
	if err != nil {
		return store.Candidate{}, err
	}
	want, ok := digests[o.candidateID]
	switch {
	case !ok:
		return store.Candidate{}, errorf(CodeJournalCorrupt, "no jit_proposed event of process %s names the candidate %s of %s", o.candidatePID, o.candidateID, c.tool)
	case cand.Name != c.tool || sha256Hex([]byte(cand.SourceCode)) != want.source:
		return store.Candidate{}, errorf(CodeJournalCorrupt, "the stored source of candidate %s of %s does not match the digest in its jit_proposed event %d", o.candidateID, c.tool, want.seq)
	// A jit_proposed event written before the schemas' digests were recorded has
	// none, and its candidate's schemas are read as stored.
	case want.input != "" && sha256Hex(cand.InputSchema) != want.input,
		want.output != "" && sha256Hex(cand.OutputSchema) != want.output:
		return store.Candidate{}, errorf(CodeJournalCorrupt, "the stored schemas of candidate %s of %s do not match the digests in its jit_proposed event %d", o.candidateID, c.tool, want.seq)
	}
	return cand, nil
}

// proposedDigests is what a jit_proposed event records of a candidate's contents.
type proposedDigests struct {
	seq           uint64
	source        string // source_sha256
	input, output string // input_schema_sha256, output_schema_sha256: "" in older events
}

// proposals returns the jit_proposed digests of the candidates of pid, by candidate
// ID, reading pid's log once per replay; a log other than the replayed process's (the
// proposer of a forked tool) is verified first.
func (rp *replayer) proposals(pid string) (map[string]proposedDigests, error) {
	if m, ok := rp.proposed[pid]; ok {
		return m, nil
	}
	if pid != rp.pid {
		if err := openLog(rp.st, pid); err != nil {
			if te, ok := own(err); ok && te.Code == CodeCallNotFound {
				return nil, errorf(CodeNotReplayable, "the process %s that proposed the tool is not in the store", liberr.Clip(pid, 80))
			}
			return nil, err
		}
	}
	m := map[string]proposedDigests{}
	for after := uint64(0); ; {
		evs, err := rp.st.Events(pid, after, store.MaxPage)
		if err != nil {
			return nil, storageErr("read the event log of "+pid, err)
		}
		for _, e := range evs {
			after = e.Seq
			if e.Type != EventJITProposed {
				continue
			}
			var d struct {
				CandidateID string `json:"candidate_id"`
				Source      string `json:"source_sha256"`
				Input       string `json:"input_schema_sha256"`
				Output      string `json:"output_schema_sha256"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
			}
			m[d.CandidateID] = proposedDigests{seq: e.Seq, source: d.Source, input: d.Input, output: d.Output}
		}
		if len(evs) < store.MaxPage {
			break
		}
	}
	rp.proposed[pid] = m
	return m, nil
}

// observedCall is one syscall the replayed code made.
type observedCall struct {
	name string
	args json.RawMessage
}

// recorder notes every syscall before the tape answers it.
type recorder struct {
	mu    sync.Mutex
	calls []observedCall
	inner wasm.Syscaller
}

func (r *recorder) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	r.mu.Lock()
	r.calls = append(r.calls, observedCall{name: name, args: append(json.RawMessage(nil), args...)})
	r.mu.Unlock()
	return r.inner.Syscall(ctx, name, args)
}

func (rp *replayer) one(ctx context.Context, c *storedCall) (ReplayResult, error) {
	tape, js, err := c.tape(rp.st)
	if err != nil {
		if te, ok := own(err); ok && te.Code == CodeStorage {
			return ReplayResult{}, err
		}
		return notReplayable(c, err), nil
	}
	p, err := rp.program(c)
	if err != nil {
		return notReplayable(c, err), nil
	}
	var recorded json.RawMessage
	if c.settlement == store.EventToolResult {
		if recorded, err = c.result(rp.st); err != nil {
			if te, ok := own(err); ok && te.Code == CodeStorage {
				return ReplayResult{}, err
			}
			return notReplayable(c, err), nil
		}
	}
	player, err := syscalls.NewTape(tape)
	if err != nil {
		return notReplayable(c, errorf(CodeNotReplayable, "%s", syscallText(err))), nil
	}
	rec := &recorder{inner: player}
	args := c.args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, runErr := rp.sb.Run(ctx, p.source, args, rec, wasm.Options{Limits: rp.opts.Limits, Seed: CallSeed(c.id)})
	if ctx.Err() != nil {
		return ReplayResult{}, ctx.Err()
	}
	out := ReplayResult{PID: c.pid, CallID: c.id, Tool: c.tool, Verdict: VerdictSame}
	hide := len(labels(js)) > 0
	if d := syscallDiff(tape, rec.calls, hide); d != nil {
		out.Verdict, out.Diff = VerdictDifferent, d
		return out, nil
	}
	// What the call came to: a value, or the code it failed with, judged as the
	// engine judges a JIT tool's return (output schema included).
	gotCode, gotValue := "", json.RawMessage(nil)
	if runErr != nil {
		gotCode = string(liberr.CodeOf(runError(c.tool, runErr, player.Refusal())))
	} else {
		v, derr := jsonexact.DecodeAny(res.Value, 0)
		switch {
		case derr != nil:
			gotCode = "output_invalid"
		case p.out != nil && p.out.Validate(v) != nil:
			gotCode = "output_invalid"
		default:
			gotValue = res.Value
		}
	}
	wantCode := c.failCode
	if c.settlement == store.EventToolResult {
		wantCode = ""
	}
	describe := func(code string, v json.RawMessage) string {
		if code != "" {
			return "error " + code
		}
		if hide {
			return "a value (labelled: not shown)"
		}
		return jsonexact.ShortText(v, 300)
	}
	switch {
	case wantCode != "" || gotCode != "":
		if wantCode != gotCode {
			out.Verdict = VerdictDifferent
			out.Diff = &Difference{Kind: "result", Recorded: describe(wantCode, recorded), Replayed: describe(gotCode, gotValue)}
		}
	default:
		wv, _ := jsonexact.DecodeAny(recorded, 0)
		gv, _ := jsonexact.DecodeAny(gotValue, 0)
		if path, what, same := jsonexact.Diff(wv, gv); !same {
			out.Verdict = VerdictDifferent
			out.Diff = &Difference{Kind: "result", Path: path, Recorded: describe("", recorded), Replayed: describe("", gotValue)}
			if !hide {
				out.Diff.What = what
			}
		}
	}
	return out, nil
}

// syscallDiff compares the recorded syscalls with the replayed ones and describes the
// first difference, or returns nil.
func syscallDiff(tape []syscalls.TapeEntry, got []observedCall, hide bool) *Difference {
	show := func(name string, args json.RawMessage) string {
		if hide {
			return liberr.Clip(name, 64) + " (labelled: arguments not shown)"
		}
		return liberr.Clip(name, 64) + " " + jsonexact.ShortText(args, 300)
	}
	for i := 0; i < max(len(tape), len(got)); i++ {
		idx := i
		switch {
		case i >= len(got):
			return &Difference{Kind: "syscall_order", Syscall: &idx, Recorded: show(tape[i].Name, tape[i].Args), Replayed: "no syscall (the code made only " + plural(len(got), "syscall") + ")"}
		case i >= len(tape):
			return &Difference{Kind: "syscall_order", Syscall: &idx, Recorded: "no syscall (the call made only " + plural(len(tape), "syscall") + ")", Replayed: show(got[i].name, got[i].args)}
		case tape[i].Name != got[i].name:
			return &Difference{Kind: "syscall_order", Syscall: &idx, Recorded: show(tape[i].Name, tape[i].Args), Replayed: show(got[i].name, got[i].args)}
		}
		wv, werr := jsonexact.DecodeAny(tape[i].Args, 0)
		gv, gerr := jsonexact.DecodeAny(got[i].args, 0)
		if werr != nil || gerr != nil {
			if werr != nil && gerr != nil {
				continue
			}
			return &Difference{Kind: "syscall_args", Syscall: &idx, Recorded: show(tape[i].Name, tape[i].Args), Replayed: show(got[i].name, got[i].args)}
		}
		if path, what, same := jsonexact.Diff(wv, gv); !same {
			d := &Difference{Kind: "syscall_args", Syscall: &idx, Path: path, Recorded: show(tape[i].Name, tape[i].Args), Replayed: show(got[i].name, got[i].args)}
			if !hide {
				d.What = what
			}
			return d
		}
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// compileFailure is what, then the first error among a failed compilation's
// diagnostics: how a stored program that no longer compiles is reported.
func compileFailure(what string, diags []jsbundle.Diagnostic) string {
	for _, d := range diags {
		if d.Severity == jsbundle.SeverityError {
			return what + fmt.Sprintf(": %s at %d:%d: %s", d.Code, d.Line, d.Column, d.Message)
		}
	}
	return what
}
