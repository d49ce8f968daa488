package tools

import (
	"fmt"
	"github.com/agentlibos/libos/liberr"
)

// Code is the stable machine code of a tools error. The model sees it as the code of
// a failed call, the audit log keeps it in the tool_failed event.
type Code string

// The codes of the JIT lifecycle and of JIT tool calls.
const (
	// CodeInvalidRequest: the arguments are not the tool's exact shape (an unknown or
	// missing field, a wrong type). propose_jit_tool has no capability-request field.
	CodeInvalidRequest Code = "invalid_request"
	// CodeInvalidName: the name does not match ^[A-Za-z0-9_-]{1,64}$.
	CodeInvalidName Code = "invalid_name"
	// CodeReservedName: the name is run_jit_tool, the multiplexed pseudo-function.
	CodeReservedName Code = "reserved_name"
	// CodeNameConflict: the name is already a tool of the process (built-in or
	// registered JIT) or already bound in it. There are no replacement semantics.
	CodeNameConflict Code = "name_conflict"
	// CodeLimitExceeded: a part of the proposal is larger than its documented bound.
	CodeLimitExceeded Code = Code(liberr.CodeLimitExceeded)
	// CodeInvalidSchema: a declared schema is not exact JSON, does not compile as JSON
	// Schema 2020-12, refers to a remote $ref, or (input schema) does not declare an
	// object root.
	CodeInvalidSchema Code = "invalid_schema"
	// CodeInvalidTest: a test is not {args, expected, syscalls} with tape entries of the
	// documented form.
	CodeInvalidTest Code = "invalid_test"
	// CodeNotFound: no candidate with that ID belongs to the calling process. Missing,
	// unknown and other processes' candidates all get this same answer.
	CodeNotFound Code = Code(liberr.CodeNotFound)
	// CodeAlreadySettled: validate_jit_tool on a candidate that was already validated
	// (or rejected, or registered); the recorded result stands and nothing is re-run.
	CodeAlreadySettled Code = "already_settled"
	// CodeCandidateRejected: register_jit_tool on a candidate whose validation failed.
	CodeCandidateRejected Code = "candidate_rejected"
	// CodeAlreadyRegistered: register_jit_tool on a candidate already registered.
	CodeAlreadyRegistered Code = "already_registered"
	// CodeValidationFailed: register_jit_tool auto-validated a proposed candidate and
	// the validation failed; the candidate is now rejected and its diagnostics are kept.
	CodeValidationFailed Code = "validation_failed"
	// CodeStorage: the durable store refused a read or write; nothing was acknowledged.
	CodeStorage Code = Code(liberr.CodeStorage)
	// CodeToolFailed: a JIT tool's program failed in a way that has no code of its own.
	CodeToolFailed Code = Code(liberr.CodeToolFailed)
)

// Error is the typed error of this package. A JIT tool call that fails in the sandbox
// keeps the sandbox's code (js_error, not_json, limit_exceeded, …), or the code of
// the syscall whose rejection the program did not catch (capability_denied, …).
type Error struct {
	Code    Code
	Message string // without the "tools: " prefix
	// CandidateID names the candidate involved, when there is one.
	CandidateID string
	// Report is the validation evidence behind CodeValidationFailed.
	Report *Report
	Err    error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "tools: " + string(e.Code)
	}
	return "tools: " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable machine code; the engine keeps it when a handler
// returns the error.
func (e *Error) ErrorCode() string { return string(e.Code) }

// Is matches another *Error with the same code, so errors.Is(err, tools.ErrNotFound)
// works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; they compare by code only.
var (
	ErrInvalidRequest    = &Error{Code: CodeInvalidRequest}
	ErrInvalidName       = &Error{Code: CodeInvalidName}
	ErrReservedName      = &Error{Code: CodeReservedName}
	ErrNameConflict      = &Error{Code: CodeNameConflict}
	ErrLimitExceeded     = &Error{Code: CodeLimitExceeded}
	ErrInvalidSchema     = &Error{Code: CodeInvalidSchema}
	ErrInvalidTest       = &Error{Code: CodeInvalidTest}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrAlreadySettled    = &Error{Code: CodeAlreadySettled}
	ErrCandidateRejected = &Error{Code: CodeCandidateRejected}
	ErrAlreadyRegistered = &Error{Code: CodeAlreadyRegistered}
	ErrValidationFailed  = &Error{Code: CodeValidationFailed}
	ErrStorage           = &Error{Code: CodeStorage}
	ErrToolFailed        = &Error{Code: CodeToolFailed}
	ErrCallNotFound      = &Error{Code: CodeCallNotFound}
	ErrCallUnsettled     = &Error{Code: CodeCallUnsettled}
	ErrNotJITTool        = &Error{Code: CodeNotJITTool}
	ErrJournalTruncated  = &Error{Code: CodeJournalTruncated}
	ErrExportForbidden   = &Error{Code: CodeExportForbidden}
	ErrNotReplayable     = &Error{Code: CodeNotReplayable}
	ErrJournalCorrupt    = &Error{Code: CodeJournalCorrupt}
)

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func storageErr(what string, err error) *Error {
	return &Error{Code: CodeStorage, Message: what + ": " + err.Error(), Err: err}
}
