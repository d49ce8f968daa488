package syscalls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
)

// TapeEntry is one ordered mock of a test's syscall tape:
//
//	{"name": "clock.now", "args": {...}, "result": {...}}
//	{"name": "kv.get", "payload": {...}}                      // payload is an alias of result
//	{"name": "clock.now", "ok": false, "error": "store offline"}
//	{"name": "clock.now", "ok": false, "error": {"code": "capability_denied", "message": "…"}}
//	{"name": "clock.now", "ok": false, "error": {"code": "capability_denied", "layer": "syscalls", "message": "…"}}
//
// Args, when present (even null), must equal the call's arguments as a JSON value.
type TapeEntry struct {
	Name string
	// Args is nil when the entry does not check the arguments.
	Args json.RawMessage
	// Result is what the call resolves with; unused when Error is set.
	Result json.RawMessage
	// Error, when set, rejects the call's Promise with this code and message.
	Error *TapeError

	// args and result are Args and Result as the entry's decoding parsed them, so that
	// NewTape does not parse them again; nil for an entry built in Go.
	args, result *jsonexact.Value
}

// TapeError is the rejection an ok:false entry produces in the guest: the error with
// Code, Layer and Message, which the guest reads as "layer: message" (the message
// alone without a layer), as it read the live error. An exported tape records the
// layer as a field; a tape without one (written by hand, or exported before the field
// existed, when Message held the whole text) rejects with Message as it is. The layer
// is never recovered from the text.
type TapeError struct {
	Code    string `json:"code"`
	Layer   string `json:"layer,omitempty"`
	Message string `json:"message"`
}

// err is the error the entry rejects with.
func (e *TapeError) err() *Error {
	return &Error{Code: liberr.Code(e.Code), Layer: e.Layer, Message: e.Message}
}

// codeToken is what an error string must look like to be used as the code as well as
// the message: `"error": "capability_denied"` rejects with code capability_denied.
var codeToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })

// layerToken is what a tape error's layer looks like: a package's layer name.
var layerToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`) })

var tapeEntryKeys = map[string]bool{"name": true, "args": true, "result": true, "payload": true, "ok": true, "error": true}

// UnmarshalJSON decodes one entry strictly: no unknown or duplicate keys, exactly one of
// result / payload / (ok:false + error). The text is parsed once.
func (e *TapeEntry) UnmarshalJSON(data []byte) error {
	v, err := jsonexact.Decode(data, 0)
	if err != nil {
		return tapeInvalid("entry is not valid JSON: " + err.Error())
	}
	return e.fromValue(v, data)
}

// fromValue builds the entry from its decoded value v and its text data, without
// parsing either again.
func (e *TapeEntry) fromValue(v jsonexact.Value, data []byte) error {
	if v.Kind != jsonexact.Object {
		return tapeInvalid("entry is not a JSON object")
	}
	var unknown []string
	field := map[string]*jsonexact.Value{}
	for i := range v.O {
		m := &v.O[i]
		if !tapeEntryKeys[m.Key] {
			unknown = append(unknown, m.Key)
		}
		field[m.Key] = &m.Val
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return tapeInvalid(fmt.Sprintf("unknown key %q (an entry has name, args, result or payload, ok, error)", unknown[0]))
	}
	_, raw, err := jsonexact.SplitDecoded(v, data)
	if err != nil {
		return tapeInvalid(err.Error())
	}
	var out TapeEntry
	name, ok := field["name"]
	if !ok || name.Kind != jsonexact.String || name.S == "" {
		return tapeInvalid(`"name" must be a non-empty string`)
	}
	out.Name = name.S
	if a, ok := raw["args"]; ok {
		out.Args, out.args = a, field["args"]
	}
	res, hasResult := raw["result"]
	resv := field["result"]
	pay, hasPayload := raw["payload"]
	if hasResult && hasPayload {
		return tapeInvalid(`"result" and "payload" are the same field; give one`)
	}
	if hasPayload {
		res, resv, hasResult = pay, field["payload"], true
	}
	okv, hasOK := field["ok"]
	if hasOK && okv.Kind != jsonexact.Bool {
		return tapeInvalid(`"ok" must be a boolean`)
	}
	errv, hasErr := field["error"]
	switch {
	case hasOK && !okv.B:
		if hasResult {
			return tapeInvalid(`an ok:false entry has "error", not "result"`)
		}
		if !hasErr {
			return tapeInvalid(`an ok:false entry needs "error" (a string or {code, message})`)
		}
		te, err := decodeTapeError(errv)
		if err != nil {
			return err
		}
		out.Error = te
	case hasErr:
		return tapeInvalid(`"error" needs "ok": false`)
	case !hasResult:
		return tapeInvalid(`an entry needs "result" (or "payload"), or "ok": false with "error"`)
	default:
		out.Result, out.result = res, resv
	}
	*e = out
	return nil
}

func decodeTapeError(v *jsonexact.Value) (*TapeError, error) {
	switch v.Kind {
	case jsonexact.String:
		te := &TapeError{Code: CodeProviderFailed, Message: v.S}
		if codeToken().MatchString(v.S) {
			te.Code = v.S
		}
		return te, nil
	case jsonexact.Object:
		for _, m := range v.O {
			if m.Key != "code" && m.Key != "layer" && m.Key != "message" {
				return nil, tapeInvalid(fmt.Sprintf(`unknown key %q in "error" (it has code, layer and message)`, m.Key))
			}
		}
		code, ok := v.Get("code")
		if !ok || code.Kind != jsonexact.String || code.S == "" {
			return nil, tapeInvalid(`"error.code" must be a non-empty string`)
		}
		te := &TapeError{Code: code.S, Message: code.S}
		if m, present := v.Get("message"); present {
			if m.Kind != jsonexact.String {
				return nil, tapeInvalid(`"error.message" must be a string`)
			}
			te.Message = m.S
		}
		if l, present := v.Get("layer"); present {
			if l.Kind != jsonexact.String || !layerToken().MatchString(l.S) {
				return nil, tapeInvalid(`"error.layer" must be a layer's name (syscalls, engine, …)`)
			}
			te.Layer = l.S
		}
		return te, nil
	}
	return nil, tapeInvalid(`"error" must be a string or {code, layer, message}`)
}

// MarshalJSON writes the entry in its canonical form (result, never payload).
func (e TapeEntry) MarshalJSON() ([]byte, error) {
	type wire struct {
		Name   string          `json:"name"`
		Args   json.RawMessage `json:"args,omitempty"`
		Result json.RawMessage `json:"result,omitempty"`
		OK     *bool           `json:"ok,omitempty"`
		Error  *TapeError      `json:"error,omitempty"`
	}
	w := wire{Name: e.Name, Args: e.Args}
	if e.Error != nil {
		f := false
		w.OK, w.Error = &f, e.Error
	} else {
		w.Result = e.Result
		if len(w.Result) == 0 {
			w.Result = json.RawMessage("null")
		}
	}
	return json.Marshal(w)
}

// ParseTape decodes a JSON array of entries strictly. The text is parsed once: each
// entry is built from its part of the one decoding, so that an error names its entry.
func ParseTape(data []byte) ([]TapeEntry, error) {
	v, err := jsonexact.Decode(data, 0)
	if err != nil {
		return nil, badTape(data)
	}
	return ParseTapeDecoded(v, data)
}

// ParseTapeDecoded is ParseTape for a tape that jsonexact.Decode has already turned into
// v (a test's syscalls, decoded with the rest of the test): it parses nothing again.
func ParseTapeDecoded(v jsonexact.Value, data []byte) ([]TapeEntry, error) {
	if v.Kind != jsonexact.Array {
		return nil, tapeInvalid("tape is not a JSON array of entries")
	}
	raws, err := jsonexact.SplitDecodedArray(v, data)
	if err != nil {
		return nil, tapeInvalid("tape is not a JSON array of entries")
	}
	out := make([]TapeEntry, len(raws))
	for i, r := range raws {
		if err := out[i].fromValue(v.A[i], r); err != nil {
			return nil, atEntry(i, err)
		}
	}
	return out, nil
}

// badTape names what is wrong with a tape that is not exact JSON: the entry that is
// not, when the text is an array at all. Only a refused tape is read this way.
func badTape(data []byte) error {
	var raws []json.RawMessage
	if json.Unmarshal(data, &raws) == nil {
		for i, r := range raws {
			if _, err := jsonexact.Decode(r, 0); err != nil {
				return atEntry(i, tapeInvalid("entry is not valid JSON: "+err.Error()))
			}
		}
	}
	return tapeInvalid("tape is not a JSON array of entries")
}

// Tape replays ordered mocks in place of every provider during validation. No provider,
// capability, approval or budget is consulted: a tape proves a tool's logic, not its
// authority. A Tape serves one test run; it implements wasm.Syscaller.
type Tape struct {
	mu       sync.Mutex
	entries  []tapeEntry
	next     int   // index of the next entry to consume
	calls    int   // calls observed
	failure  error // the first mismatch; sticky, even if the guest caught it
	finished bool
	refused  *Error // the last error Syscall returned (Refusal)
}

type tapeEntry struct {
	TapeEntry
	args any // decoded Args, nil when unchecked
}

// NewTape checks entries and returns a player positioned at the first one. An entry
// that ParseTape or UnmarshalJSON made is not parsed again.
func NewTape(entries []TapeEntry) (*Tape, error) {
	t := &Tape{entries: make([]tapeEntry, len(entries))}
	for i, e := range entries {
		te := tapeEntry{TapeEntry: e}
		if e.Name == "" {
			return nil, atEntry(i, tapeInvalid(`"name" must be a non-empty string`))
		}
		if e.Args != nil {
			if te.TapeEntry.args == nil {
				v, err := jsonexact.Decode(e.Args, 0)
				if err != nil {
					return nil, atEntry(i, tapeInvalid("args are not valid JSON: "+err.Error()))
				}
				te.TapeEntry.args = &v
			}
			te.args = te.TapeEntry.args.ToAny()
		}
		if e.Error == nil {
			if len(e.Result) == 0 {
				te.Result = json.RawMessage("null")
				te.TapeEntry.result = &jsonexact.Value{Kind: jsonexact.Null}
			} else if te.TapeEntry.result == nil {
				v, err := jsonexact.Decode(e.Result, 0)
				if err != nil {
					return nil, atEntry(i, tapeInvalid("result is not valid JSON: "+err.Error()))
				}
				te.TapeEntry.result = &v
			}
		} else if e.Error.Code == "" {
			return nil, atEntry(i, tapeInvalid(`"error.code" must be a non-empty string`))
		}
		if err := checkAgainstRoute(i, te); err != nil {
			return nil, err
		}
		t.entries[i] = te
	}
	return t, nil
}

// commonCodes are the codes the router can refuse any route with.
var commonCodes = []liberr.Code{CodeArgumentInvalid, CodeCapabilityDenied, CodeApprovalDenied, CodeApprovalTimeout,
	CodeBudgetExceeded, CodeProviderFailed, CodeAuditFailed}

// routeCodes are the codes particular to a route's own stages and provider.
var routeCodes = map[string][]liberr.Code{
	"net.fetch": {CodeURLInvalid, CodeHostNotAllowed, CodeMethodNotAllowed, CodeAddressNotAllowed, CodeTooManyRedirects,
		CodeRequestTooLarge, CodeResponseTooLarge, CodeFetchTimeout, CodeFetchFailed, CodeSecretNotAllowed, CodeSecretUnavailable},
}

// RouteErrorCodes returns the codes route can fail with in production, and whether it
// can also pass on any other registered code (tools.call fails with the code of the
// tool it called, one of liberr's registry). It is what a tape's ok:false entry may
// use.
func RouteErrorCodes(route string) (codes []liberr.Code, open bool) {
	rs, err := routes()
	if err != nil {
		return nil, false
	}
	rt, ok := rs[route]
	if !ok {
		return nil, false
	}
	codes = append(codes, commonCodes...)
	codes = append(codes, routeCodes[route]...)
	if rt.flow != nil {
		codes = append(codes, CodeDataFlowDenied)
	}
	if rt.provider.nests || slices.Contains(rt.slots, SlotSize) {
		codes = append(codes, CodeLimitExceeded) // nesting depth; the image's size bound
	}
	return codes, rt.provider.nests
}

// checkAgainstRoute holds an entry of a known route to what production could answer: its
// args to the route's argument schema, its result to the route's result schema, its
// error to one of the route's real codes. A tape that answers what production never
// would proves nothing. The error's Details carry the entry's pointer in the tape.
func checkAgainstRoute(i int, e tapeEntry) error {
	rs, err := routes()
	if err != nil {
		return err
	}
	rt, ok := rs[e.Name]
	if !ok {
		return nil // the call itself fails with the fixed unknown_syscall error
	}
	bad := func(field, format string, args ...any) error {
		err := atEntry(i, tapeInvalid(fmt.Sprintf(format, args...)))
		var se *Error
		if errors.As(err, &se) {
			se.Details = []liberr.Detail{{Path: fmt.Sprintf("/%d/%s", i, field), Message: se.Error()}}
		}
		return err
	}
	if e.Args != nil {
		if _, problem, _ := checkArgs(rt, syscallArgs{sent: e.Args, raw: e.Args, value: *e.TapeEntry.args}); problem != "" {
			return bad("args", "args do not match the argument schema of %s, so no call could match them: %s", rt.name, problem)
		}
	}
	if e.Error == nil {
		if err := rt.resultSchema.Validate(e.TapeEntry.result.ToAny()); err != nil {
			return bad("result", "result does not match the result schema of %s, which production never breaks: %s", rt.name, schemaMessage(err))
		}
		return nil
	}
	codes, open := RouteErrorCodes(rt.name)
	for _, c := range codes {
		if string(c) == e.Error.Code {
			return nil
		}
	}
	if open {
		// tools.call passes on the code of the tool it called, which is a code of
		// the module: one of the registry's, never one made up.
		if _, ok := liberr.Lookup(liberr.Code(e.Error.Code)); ok {
			return nil
		}
		return bad("error", "error code %q is not one %s fails with in production: it passes on the code of the tool it called, and that is a registered code (ERRORS.md)", liberr.Clip(e.Error.Code, 64), rt.name)
	}
	names := make([]string, len(codes))
	for j, c := range codes {
		names[j] = string(c)
	}
	return bad("error", "error code %q is not one %s fails with in production (%s)", liberr.Clip(e.Error.Code, 64), rt.name, strings.Join(names, ", "))
}

// Refusal is the last error a Syscall of t returned (a mismatch, or an entry's
// ok:false error), or nil: what the validator reports when the program let it escape,
// as Bound.Refusal is for a tool call.
func (t *Tape) Refusal() *Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// Syscall consumes the next entry. A call that does not match it (name, arguments, or
// no entry left) rejects with tape_mismatch and fails the test for good, even if the
// guest catches the rejection.
func (t *Tape) Syscall(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return t.settle(name, args, nil)
}

// SyscallExact is Syscall for arguments the sandbox has already decoded exactly
// (wasm.ExactSyscaller): the tape compares and checks that decoding, parsing nothing.
func (t *Tape) SyscallExact(_ context.Context, name string, args json.RawMessage, value jsonexact.Value) (json.RawMessage, error) {
	return t.settle(name, args, &value)
}

// settle runs one call under t.mu and notes a refusal (Refusal).
func (t *Tape) settle(name string, args json.RawMessage, value *jsonexact.Value) (json.RawMessage, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res, err := t.syscall(name, args, value)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			t.refused = se
		}
	}
	return res, err
}

// syscall is Syscall under t.mu; value, when not nil, is args already decoded exactly.
func (t *Tape) syscall(name string, args json.RawMessage, value *jsonexact.Value) (json.RawMessage, error) {
	call := t.calls
	t.calls++
	if t.failure != nil {
		return nil, t.failure
	}
	// The arguments are parsed once: the comparison with the entry and the route's
	// schema read the same decoding, the sandbox's when it hands one over.
	var in syscallArgs
	if value != nil && len(args) > 0 {
		in = syscallArgs{sent: args, raw: args, value: *value}
	} else {
		in = decodeArgs(args)
	}
	decErr := in.err
	if len(args) == 0 {
		// decodeArgs reads no arguments as {}; a tape holds the call to what it sent.
		_, decErr = jsonexact.Decode(args, 0)
	}
	if t.next >= len(t.entries) {
		return nil, t.fail(errorf(CodeTapeMismatch, fmt.Sprintf(
			"tape: call %d is %s %s but the tape has no entry left (%d given)",
			call, liberr.Clip(name, 64), shortArgs(args), len(t.entries)), nil))
	}
	i := t.next
	e := &t.entries[i]
	if name != e.Name {
		return nil, t.fail(errorf(CodeTapeMismatch, fmt.Sprintf(
			"tape entry %d: expected %s %s, observed %s %s", i, e.Name, shortArgs(e.Args), liberr.Clip(name, 64), shortArgs(args)), nil))
	}
	if decErr != nil {
		return nil, t.fail(errorf(CodeArgumentInvalid, fmt.Sprintf(
			"tape entry %d (%s): arguments are not valid JSON: %v", i, e.Name, decErr), decErr))
	}
	if e.Args != nil && !jsonexact.Equal(e.args, in.value.ToAny()) {
		return nil, t.fail(errorf(CodeTapeMismatch, fmt.Sprintf(
			"tape entry %d (%s): expected args %s, observed %s", i, e.Name, shortArgs(e.Args), shortArgs(args)), nil))
	}
	// The call must also be one production could run: a known route with arguments
	// that pass its schema. Unknown routes get the same fixed error as in production.
	rs, err := routes()
	if err != nil {
		return nil, t.fail(errorf(CodeProviderFailed, "route table: "+err.Error(), err))
	}
	rt, ok := rs[name]
	if !ok {
		return nil, t.fail(&Error{Code: CodeUnknownSyscall, Message: unknownSyscallMessage})
	}
	if _, err := validateArgs(rt, in); err != nil {
		var se *Error
		errors.As(err, &se)
		return nil, t.fail(errorf(se.Code, fmt.Sprintf("tape entry %d: %s", i, se.Message), err))
	}
	t.next++
	if e.Error != nil {
		return nil, e.Error.err()
	}
	return append(json.RawMessage(nil), e.Result...), nil
}

func (t *Tape) fail(err *Error) error {
	if t.failure == nil {
		t.failure = err
	}
	return t.failure
}

// Finish ends the run and says whether the tape was followed: the first mismatch (even
// one the guest caught), else entries left over. It is nil when every entry was
// consumed in order.
func (t *Tape) Finish() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = true
	if t.failure != nil {
		return t.failure
	}
	if left := len(t.entries) - t.next; left > 0 {
		e := t.entries[t.next]
		return errorf(CodeTapeLeftover, fmt.Sprintf(
			"tape: %d of %d entries left over; entry %d (%s %s) was never called",
			left, len(t.entries), t.next, e.Name, shortArgs(e.Args)), nil)
	}
	return nil
}

// Consumed is how many entries matched so far.
func (t *Tape) Consumed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

// tapeProblem is what is wrong with a tape, without saying where: atEntry places it
// at its entry. It is the cause of the tape_invalid error tapeInvalid makes.
type tapeProblem string

func (p tapeProblem) Error() string { return string(p) }

func tapeInvalid(msg string) *Error { return errorf(CodeTapeInvalid, "tape: "+msg, tapeProblem(msg)) }

// atEntry places a tape problem at entry i.
func atEntry(i int, err error) error {
	var p tapeProblem
	if errors.As(err, &p) {
		return errorf(CodeTapeInvalid, fmt.Sprintf("tape entry %d: %s", i, p), err)
	}
	return err
}

func shortArgs(a json.RawMessage) string {
	if a == nil {
		return "(any args)"
	}
	return jsonexact.ShortText(a, 200)
}

func compact(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}
