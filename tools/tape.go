package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// The codes with which a stored call is refused for export or replay. Each names the
// reason.
const (
	// CodeCallNotFound: the process has no tool call with that ID.
	CodeCallNotFound Code = "call_not_found"
	// CodeCallUnsettled: the call has no settlement (it is open, or it was settled as
	// unknown after a crash): there is no result to expect.
	CodeCallUnsettled Code = "call_unsettled"
	// CodeNotJITTool: the call is of a built-in tool, whose code is not in the store.
	CodeNotJITTool Code = "not_jit_tool"
	// CodeJournalTruncated: an entry of the call's journal was over its bound and keeps
	// only digests.
	CodeJournalTruncated Code = "journal_truncated"
	// CodeExportForbidden: the call saw labelled data that the image's data-flow rules
	// forbid exporting.
	CodeExportForbidden Code = "export_forbidden"
	// CodeNotReplayable: the call cannot be expressed as a tape: it has no journal (it
	// predates it), a syscall of it was refused before routing (a tape cannot say
	// that), or its tool's code is no longer in the store.
	CodeNotReplayable Code = "not_replayable"
	// CodeJournalCorrupt: the process's event log does not verify (an event edited,
	// removed, reordered or taken from another log), or the call's journal, stored
	// result or code does not match the digests its hash-chained events carry.
	CodeJournalCorrupt Code = "journal_corrupt"
)

// TestCase is one validation test, {args, expected, syscalls}: what `libos tape`
// exports and a candidate's tests hold. A test of a call that fails has
// expected_error, {"code": …}, the refusal, instead of expected.
type TestCase struct {
	Args          json.RawMessage      `json:"args"`
	Expected      json.RawMessage      `json:"expected,omitempty"`
	ExpectedError *ExpectedError       `json:"expected_error,omitempty"`
	Syscalls      []syscalls.TapeEntry `json:"syscalls"`
}

// ExpectedError is the refusal a test expects: the code the call fails with.
type ExpectedError struct {
	Code string `json:"code"`
}

// afterReturn says whether a failure with code, settled at stage (the tool_failed
// event's "stage" field), came after the tool's code returned: the engine's
// output-schema and result-size checks, which a test does not exercise, or the host
// failing. Such a failure cannot be a test's expected refusal.
//
// An event written before the stage was recorded has none. Its limit_exceeded may be
// the result limit or a limit of the sandbox, and nothing but its text would tell: it
// is read as after return, so such a call is refused for export (not_replayable)
// rather than exported as a test that could never pass.
func afterReturn(code, stage string) bool {
	if stage == engine.FailedAtResult {
		return true
	}
	switch code {
	case string(engine.CodeOutputInvalid), string(CodeStorage), string(CodeToolFailed), "canceled", "":
		return true
	case string(CodeLimitExceeded):
		return stage != engine.FailedInHandler
	}
	return false
}

// storedCall is one tool call as the store keeps it: its tool_called event, its
// settlement, its syscall audit events and its journal.
type storedCall struct {
	pid, id     string
	seq         uint64 // of tool_called
	time        time.Time
	tool        string
	toolID      string
	kind        string
	origin      toolOrigin // where the code of toolID is: zero when no event names it
	args        json.RawMessage
	settlement  string // tool_result, tool_failed, unknown_settlement, or "" when open
	failCode    string
	failReason  string
	failStage   string // "" in events written before the stage was recorded
	resultSeq   uint64 // of tool_result
	resultSHA   string // the tool_result event's result_sha256: the stored result's digest
	syscalls    []syscallEvent
	missingJrnl bool // a syscall event of the call names no journal entry
}

// toolOrigin is the candidate a JIT tool ID was made from, as the log records it: its
// jit_registered event, or, in a fork, the process_forked event that re-created the
// binding under a new tool ID. A call's code is found through it, never through the
// process's current binding of the name, which a revoke or a replacement changes.
type toolOrigin struct {
	candidatePID, candidateID string
}

type syscallEvent struct {
	seq     uint64
	stage   string
	journal *struct {
		Index     int    `json:"index"`
		SHA256    string `json:"sha256"`
		Truncated bool   `json:"truncated"`
	}
}

// scanCalls reads pid's event log once and returns its tool calls in the order they
// were opened; only calls for which want is true are kept (nil keeps all).
func scanCalls(st *store.Store, pid string, want func(callID string) bool) ([]*storedCall, error) {
	var (
		out     []*storedCall
		byID    = map[string]*storedCall{}
		origins = map[string]toolOrigin{}
		after   uint64
	)
	for {
		evs, err := st.Events(pid, after, store.MaxPage)
		if err != nil {
			return nil, storageErr("read the event log of "+pid, err)
		}
		for _, e := range evs {
			after = e.Seq
			switch e.Type {
			case EventJITRegistered:
				var d struct {
					CandidateID string `json:"candidate_id"`
					ToolID      string `json:"tool_id"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
				}
				origins[d.ToolID] = toolOrigin{candidatePID: pid, candidateID: d.CandidateID}
			case engine.EventProcessForked:
				var d struct {
					Bindings []struct {
						ToolID       string `json:"tool_id"`
						CandidateID  string `json:"candidate_id"`
						CandidatePID string `json:"candidate_pid"`
					} `json:"bindings"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
				}
				for _, b := range d.Bindings {
					origins[b.ToolID] = toolOrigin{candidatePID: b.CandidatePID, candidateID: b.CandidateID}
				}
			}
			if e.CallID == "" || (want != nil && !want(e.CallID)) {
				continue
			}
			switch e.Type {
			case store.EventToolCalled:
				var d struct {
					Tool   string          `json:"tool"`
					ToolID string          `json:"tool_id"`
					Kind   string          `json:"kind"`
					Args   json.RawMessage `json:"args"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
				}
				c := &storedCall{pid: pid, id: e.CallID, seq: e.Seq, time: e.Time, tool: d.Tool, toolID: d.ToolID, kind: d.Kind, args: d.Args, origin: origins[d.ToolID]}
				byID[c.id] = c
				out = append(out, c)
			case store.EventToolResult, store.EventToolFailed, store.EventUnknownSettlement:
				c := byID[e.CallID]
				if c == nil || c.settlement != "" {
					continue
				}
				c.settlement = e.Type
				switch e.Type {
				case store.EventToolFailed:
					var d struct{ Code, Reason, Stage string }
					_ = json.Unmarshal(e.Data, &d)
					c.failCode, c.failReason, c.failStage = d.Code, d.Reason, d.Stage
				case store.EventToolResult:
					var d struct {
						SHA256 string `json:"result_sha256"`
					}
					_ = json.Unmarshal(e.Data, &d)
					c.resultSeq, c.resultSHA = e.Seq, d.SHA256
				}
			case syscalls.EventSyscall:
				c := byID[e.CallID]
				if c == nil {
					continue
				}
				var se syscallEvent
				var d struct {
					Stage   string          `json:"stage"`
					Journal json.RawMessage `json:"journal"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
				}
				se.seq, se.stage = e.Seq, d.Stage
				if len(d.Journal) > 0 {
					if err := json.Unmarshal(d.Journal, &se.journal); err != nil {
						return nil, errorf(CodeStorage, "event %d of %s: %v", e.Seq, pid, err)
					}
				}
				if se.journal == nil {
					c.missingJrnl = true
				}
				c.syscalls = append(c.syscalls, se)
			}
		}
		if len(evs) < store.MaxPage {
			return out, nil
		}
	}
}

// openLog checks that pid names a process of st and that its event log verifies
// (store.Verify: dense sequence numbers, each event's hash over its content, each
// prev_hash the previous event's hash, the chain ending at the recorded head). An ID
// the store could never hold (empty, oversized, control characters) names no process
// either: it is call_not_found like an unknown one, and the message quotes it clipped,
// never whole. A log that does not verify (an event edited, removed, reordered, or
// taken from another process's log) is journal_corrupt: nothing read from it becomes
// a test or a verdict.
func openLog(st *store.Store, pid string) error {
	if _, err := st.Process(pid); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
			return errorf(CodeCallNotFound, "no process %q", liberr.Clip(pid, 80))
		}
		return storageErr("read process "+liberr.Clip(pid, 80), err)
	}
	if err := st.Verify(pid); err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return &Error{Layer: layer, Code: CodeJournalCorrupt, Err: err,
				Message: fmt.Sprintf("the event log of %s does not verify, so none of its calls is read: %s", pid, liberr.Clip(err.Error(), 300))}
		}
		return storageErr("verify the event log of "+pid, err)
	}
	return nil
}

// findCall returns call callID of pid.
func findCall(st *store.Store, pid, callID string) (*storedCall, error) {
	if err := openLog(st, pid); err != nil {
		return nil, err
	}
	cs, err := scanCalls(st, pid, func(id string) bool { return id == callID })
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, errorf(CodeCallNotFound, "process %s has no tool call %q", pid, liberr.Clip(callID, 80))
	}
	return cs[0], nil
}

// tape checks that c can be replayed from its journal and returns the journal as a
// tape, in order. It refuses, with the code naming the reason, a call that is
// unsettled, of a built-in tool, without a journal, with a truncated or corrupt
// journal, or with a syscall refused before routing.
func (c *storedCall) tape(st *store.Store) ([]syscalls.TapeEntry, []store.JournalEntry, error) {
	if c.kind != string(engine.KindJIT) {
		return nil, nil, errorf(CodeNotJITTool, "call %s is of %s, a %s tool: only a JIT tool's code can be replayed", c.id, c.tool, c.kind)
	}
	switch c.settlement {
	case "":
		return nil, nil, errorf(CodeCallUnsettled, "call %s of %s is not settled", c.id, c.tool)
	case store.EventUnknownSettlement:
		return nil, nil, errorf(CodeCallUnsettled, "call %s of %s was settled as unknown after a crash: its result is not known", c.id, c.tool)
	}
	if c.missingJrnl {
		return nil, nil, errorf(CodeNotReplayable, "call %s of %s has syscalls without a journal (it predates the journal)", c.id, c.tool)
	}
	js, err := st.Journal(c.pid, c.id)
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, nil, &Error{Layer: layer, Code: CodeJournalCorrupt, Message: fmt.Sprintf("journal of call %s: %v", c.id, err), Err: err}
		}
		return nil, nil, storageErr("read the journal of "+c.id, err)
	}
	if len(js) != len(c.syscalls) {
		return nil, nil, errorf(CodeJournalCorrupt, "call %s has %d syscall events and %d journal entries", c.id, len(c.syscalls), len(js))
	}
	tape := make([]syscalls.TapeEntry, len(js))
	for i, e := range js {
		ref := c.syscalls[i].journal
		if ref.Index != i || ref.SHA256 != e.Digest {
			return nil, nil, errorf(CodeJournalCorrupt, "journal entry %d of call %s does not match the digest in its audit event %d", i, c.id, c.syscalls[i].seq)
		}
		if e.Truncated {
			return nil, nil, errorf(CodeJournalTruncated, "syscall %d (%s) of call %s was over the journal's bound (%d bytes of arguments, %d of result): only its digests are kept",
				i, e.Route, c.id, e.ArgsBytes, e.ResultBytes)
		}
		if stage := c.syscalls[i].stage; e.Error != nil && (stage == "route" || stage == "args") {
			return nil, nil, errorf(CodeNotReplayable, "syscall %d (%s) of call %s was refused before routing (%s): a tape cannot replay that refusal",
				i, liberr.Clip(e.Route, 64), c.id, e.Error.Code)
		}
		te := syscalls.TapeEntry{Name: e.Route, Args: e.Args, Result: e.Result}
		if e.Error != nil {
			// The layer is carried as a field; an entry journaled before it was kept
			// holds the whole text in its message and none, and replays as it is.
			te.Error = &syscalls.TapeError{Code: e.Error.Code, Layer: e.Error.Layer, Message: e.Error.Message}
		}
		tape[i] = te
	}
	return tape, js, nil
}

// result returns the stored result of c, a call settled with tool_result, after
// checking it against its tool_result event: the record must be this call's and its
// bytes must have the digest the hash-chained event carries. A result edited, removed
// or taken from another call is journal_corrupt, never an expected value.
func (c *storedCall) result(st *store.Store) (json.RawMessage, error) {
	res, err := st.ToolResult(c.pid, c.id)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		return nil, storageErr("read the result of "+c.id, err)
	}
	sum := sha256.Sum256(res.Structured)
	if err != nil || res.PID != c.pid || res.CallID != c.id || res.Tool != c.tool || hex.EncodeToString(sum[:]) != c.resultSHA {
		return nil, errorf(CodeJournalCorrupt, "the stored result of call %s does not match the digest in its tool_result event %d", c.id, c.resultSeq)
	}
	return res.Structured, nil
}

// labels lists the data-flow labels the call's syscalls returned, in order of first
// appearance.
func labels(js []store.JournalEntry) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range js {
		for _, l := range e.Labels {
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	return out
}

// ExportTape returns settled JIT tool call callID of process pid as a test case: the
// call's arguments, its returned value as expected, and every syscall it made, in
// order, with its exact arguments and the result or error its code received. It reads
// the store and writes nothing.
//
// It refuses, with an *Error whose code names the reason, a call that does not exist
// (call_not_found), is unsettled (call_unsettled), is of a built-in tool
// (not_jit_tool), failed after its code returned (not_replayable: the output schema
// or the result limit refused it, which a test does not exercise), has a truncated
// journal (journal_truncated), saw labelled data (export_forbidden), or cannot be
// expressed as a tape (not_replayable), or whose test no validation would accept
// (limit_exceeded: over a test's default bounds of tape entries, bytes or nesting;
// not_replayable for any other refusal of the validator's parse). The tape bound is
// the sandbox's syscall bound per run, so a call stopped at that bound exports a test
// that validates. The process's event log is verified first,
// and the call's journal and stored result are checked against the digests its
// events carry: an edited store is journal_corrupt, never a test. Arguments are exported as
// the code sent them: a secret is never in them, since secrets are passed by
// reference and the reference stays a reference.
//
// A call whose code failed (an uncaught refused syscall, a JavaScript error, a limit
// of the sandbox) exports expected_error with the code it failed with, the refusal
// validation then expects.
func ExportTape(st *store.Store, pid, callID string) (TestCase, error) {
	c, err := findCall(st, pid, callID)
	if err != nil {
		return TestCase{}, err
	}
	return exportCall(st, c)
}

func exportCall(st *store.Store, c *storedCall) (TestCase, error) {
	tape, js, err := c.tape(st)
	if err != nil {
		return TestCase{}, err
	}
	if ls := labels(js); len(ls) > 0 {
		pol, err := exportPolicy(st, c.pid)
		if err != nil {
			// Rules that cannot be read cannot allow anything.
			return TestCase{}, errorf(CodeExportForbidden, "call %s saw data labelled %s, and the data-flow rules of its image cannot be read (%v)", c.id, strings.Join(ls, ", "), err)
		}
		if l, forbidden := pol.ExportForbidden(ls); forbidden {
			return TestCase{}, errorf(CodeExportForbidden, "call %s saw data labelled %s, which the image's data-flow rules keep from leaving the process (an exported tape goes where no rule is checked)", c.id, l)
		}
	}
	args := c.args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	tc := TestCase{Args: args, Syscalls: tape}
	if c.settlement != store.EventToolResult {
		if afterReturn(c.failCode, c.failStage) {
			return TestCase{}, errorf(CodeNotReplayable, "call %s of %s failed with %s after its code ran (%s): a test cannot expect that refusal",
				c.id, c.tool, orNone(c.failCode), liberr.Clip(c.failReason, 200))
		}
		tc.ExpectedError = &ExpectedError{Code: c.failCode}
	} else {
		res, err := c.result(st)
		if err != nil {
			return TestCase{}, err
		}
		tc.Expected = res
	}
	if err := c.validatable(tc); err != nil {
		return TestCase{}, err
	}
	return tc, nil
}

// validatable refuses the test of c that no validation would accept, so that an
// export is a test that can pass: over the default bounds of a test (its tape's
// entries, its bytes as compact JSON, its nesting) it is limit_exceeded, and one the
// validator's parse refuses otherwise is not_replayable. The check is the validator's
// own parse of a test, on the bytes an export prints.
func (c *storedCall) validatable(tc TestCase) error {
	lim := Limits{}.withDefaults()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tc); err != nil {
		return errorf(CodeNotReplayable, "the test of call %s does not encode: %v", c.id, err)
	}
	item := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(tc.Syscalls) > lim.MaxTapeEntries {
		return errorf(CodeLimitExceeded, "call %s of %s made %d syscalls; a test's tape holds at most %d, so no validation would accept its test",
			c.id, c.tool, len(tc.Syscalls), lim.MaxTapeEntries)
	}
	if len(item) > lim.MaxTestBytes {
		return errorf(CodeLimitExceeded, "the test of call %s of %s is %d bytes; a test is at most %d, so no validation would accept it",
			c.id, c.tool, len(item), lim.MaxTestBytes)
	}
	if doc, err := jsonexact.DecodeDoc(item, 0); err == nil && doc.Depth() > lim.MaxDepth {
		return errorf(CodeLimitExceeded, "the test of call %s of %s nests %d deep; a test nests at most %d, so no validation would accept it",
			c.id, c.tool, doc.Depth(), lim.MaxDepth)
	}
	if _, perr := parseTest(item, lim); perr != nil {
		return errorf(CodeNotReplayable, "the test of call %s of %s would not validate (%s): %s", c.id, c.tool, perr.Code, perr.Message)
	}
	return nil
}

// exportPolicy compiles the data-flow rules of the image process pid was created
// from, as its record keeps it. A record without an image has no rules.
func exportPolicy(st *store.Store, pid string) (*syscalls.Policy, error) {
	rec, err := st.Process(pid)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Image *struct{ syscalls.PolicySpec } `json:"image"`
	}
	if len(rec.Image) > 0 {
		if err := json.Unmarshal(rec.Image, &pr); err != nil {
			return nil, err
		}
	}
	if pr.Image == nil {
		return nil, nil
	}
	pol, probs := syscalls.CompilePolicy(pr.Image.PolicySpec)
	if len(probs) > 0 {
		return nil, fmt.Errorf("%d problems in the stored policy, the first at %s: %s", len(probs), probs[0].At, probs[0].Message)
	}
	return pol, nil
}

func orNone(code string) string {
	if code == "" {
		return "no code"
	}
	return code
}

// CallTool names the tool of call callID of process pid.
func CallTool(st *store.Store, pid, callID string) (string, error) {
	c, err := findCall(st, pid, callID)
	if err != nil {
		return "", err
	}
	return c.tool, nil
}
