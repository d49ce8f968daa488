package syscalls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
)

// TapeEntry is one ordered mock of a test's syscall tape:
//
//	{"name": "clock.now", "args": {...}, "result": {...}}
//	{"name": "kv.get", "payload": {...}}                      // payload is an alias of result
//	{"name": "clock.now", "ok": false, "error": "store offline"}
//	{"name": "clock.now", "ok": false, "error": {"code": "capability_denied", "message": "…"}}
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
}

// TapeError is the rejection an ok:false entry produces in the guest. Both fields reach
// the guest verbatim.
type TapeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// codeToken is what an error string must look like to be used as the code as well as
// the message: `"error": "capability_denied"` rejects with code capability_denied.
var codeToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })
var tapeEntryKeys = map[string]bool{"name": true, "args": true, "result": true, "payload": true, "ok": true, "error": true}

// UnmarshalJSON decodes one entry strictly: no unknown or duplicate keys, exactly one of
// result / payload / (ok:false + error).
func (e *TapeEntry) UnmarshalJSON(data []byte) error {
	v, err := jsonexact.DecodeAny(data, 0)
	if err != nil {
		return tapeInvalid("entry is not valid JSON: " + err.Error())
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return tapeInvalid("entry is not a JSON object")
	}
	var unknown []string
	for k := range obj {
		if !tapeEntryKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return tapeInvalid(fmt.Sprintf("unknown key %q (an entry has name, args, result or payload, ok, error)", unknown[0]))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil { // safe: keys are unique, checked above
		return tapeInvalid(err.Error())
	}
	var out TapeEntry
	name, ok := obj["name"].(string)
	if !ok || name == "" {
		return tapeInvalid(`"name" must be a non-empty string`)
	}
	out.Name = name
	if a, ok := raw["args"]; ok {
		out.Args = compact(a)
	}
	res, hasResult := raw["result"]
	pay, hasPayload := raw["payload"]
	if hasResult && hasPayload {
		return tapeInvalid(`"result" and "payload" are the same field; give one`)
	}
	if hasPayload {
		res, hasResult = pay, true
	}
	okv, hasOK := obj["ok"]
	okb, okIsBool := okv.(bool)
	if hasOK && !okIsBool {
		return tapeInvalid(`"ok" must be a boolean`)
	}
	errv, hasErr := obj["error"]
	switch {
	case hasOK && !okb:
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
		out.Result = compact(res)
	}
	*e = out
	return nil
}

func decodeTapeError(v any) (*TapeError, error) {
	switch x := v.(type) {
	case string:
		te := &TapeError{Code: CodeProviderFailed, Message: x}
		if codeToken().MatchString(x) {
			te.Code = x
		}
		return te, nil
	case map[string]any:
		for k := range x {
			if k != "code" && k != "message" {
				return nil, tapeInvalid(fmt.Sprintf(`unknown key %q in "error" (it has code and message)`, k))
			}
		}
		code, ok := x["code"].(string)
		if !ok || code == "" {
			return nil, tapeInvalid(`"error.code" must be a non-empty string`)
		}
		msg := code
		if m, present := x["message"]; present {
			if msg, ok = m.(string); !ok {
				return nil, tapeInvalid(`"error.message" must be a string`)
			}
		}
		return &TapeError{Code: code, Message: msg}, nil
	}
	return nil, tapeInvalid(`"error" must be a string or {code, message}`)
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

// ParseTape decodes a JSON array of entries strictly.
func ParseTape(data []byte) ([]TapeEntry, error) {
	// Split the array first, then decode each entry strictly, so that an error names
	// its entry.
	var raws []json.RawMessage
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '[' || !utf8.Valid(data) || json.Unmarshal(data, &raws) != nil {
		return nil, tapeInvalid("tape is not a JSON array of entries")
	}
	out := make([]TapeEntry, len(raws))
	for i, r := range raws {
		if err := out[i].UnmarshalJSON(r); err != nil {
			return nil, atEntry(i, err)
		}
	}
	return out, nil
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
}

type tapeEntry struct {
	TapeEntry
	args any // decoded Args, nil when unchecked
}

// NewTape checks entries and returns a player positioned at the first one.
func NewTape(entries []TapeEntry) (*Tape, error) {
	t := &Tape{entries: make([]tapeEntry, len(entries))}
	for i, e := range entries {
		te := tapeEntry{TapeEntry: e}
		if e.Name == "" {
			return nil, atEntry(i, tapeInvalid(`"name" must be a non-empty string`))
		}
		if e.Args != nil {
			v, err := jsonexact.DecodeAny(e.Args, 0)
			if err != nil {
				return nil, atEntry(i, tapeInvalid("args are not valid JSON: "+err.Error()))
			}
			te.args = v
		}
		if e.Error == nil {
			if len(e.Result) == 0 {
				te.Result = json.RawMessage("null")
			} else if _, err := jsonexact.DecodeAny(e.Result, 0); err != nil {
				return nil, atEntry(i, tapeInvalid("result is not valid JSON: "+err.Error()))
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
// can also pass on any other code (tools.call fails with the code of the tool it
// called). It is what a tape's ok:false entry may use.
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
	if rt.provider.nests {
		codes = append(codes, CodeLimitExceeded)
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
		if _, err := validateArgs(rt, decodeArgs(e.Args)); err != nil {
			var se *Error
			errors.As(err, &se)
			return bad("args", "args do not match the argument schema of %s, so no call could match them: %s",
				rt.name, strings.TrimPrefix(se.Message, rt.name+": "))
		}
	}
	if e.Error == nil {
		v, _ := jsonexact.DecodeAny(e.Result, 0)
		if err := rt.resultSchema.Validate(v); err != nil {
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
	if open && codeToken().MatchString(e.Error.Code) {
		return nil
	}
	names := make([]string, len(codes))
	for j, c := range codes {
		names[j] = string(c)
	}
	return bad("error", "error code %q is not one %s fails with in production (%s)", liberr.Clip(e.Error.Code, 64), rt.name, strings.Join(names, ", "))
}

// Syscall consumes the next entry. A call that does not match it (name, arguments, or
// no entry left) rejects with tape_mismatch and fails the test for good, even if the
// guest catches the rejection.
func (t *Tape) Syscall(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	call := t.calls
	t.calls++
	if t.failure != nil {
		return nil, t.failure
	}
	observed, decErr := jsonexact.DecodeAny(args, 0)
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
	if e.Args != nil && !jsonexact.Equal(e.args, observed) {
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
	if _, err := validateArgs(rt, decodeArgs(args)); err != nil {
		var se *Error
		errors.As(err, &se)
		return nil, t.fail(errorf(se.Code, fmt.Sprintf("tape entry %d: %s", i, se.Message), err))
	}
	t.next++
	if e.Error != nil {
		return nil, recorded(liberr.Code(e.Error.Code), e.Error.Message)
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

func tapeInvalid(msg string) *Error { return errorf(CodeTapeInvalid, "tape: "+msg, nil) }

func atEntry(i int, err error) error {
	var se *Error
	if errors.As(err, &se) {
		return errorf(se.Code, fmt.Sprintf("tape entry %d: %s", i, strings.TrimPrefix(se.Message, "tape: ")), err)
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
