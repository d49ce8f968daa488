package tools

import "github.com/agentlibos/libos/liberr"

// Code is the stable machine code of a tools error (the module's one code type). The
// model sees it as the code of a failed call, the audit log keeps it in the
// tool_failed event.
type Code = liberr.Code

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

// Error is the typed error of this package: the module's one error type (package
// liberr), with Layer "tools". A JIT tool call that fails in the sandbox keeps the
// sandbox's code (js_error, not_json, limit_exceeded, …), or the code of the syscall
// whose rejection the program did not catch (capability_denied, …). A lifecycle
// refusal that names a candidate carries a *CandidateRef as its cause.
type Error = liberr.Error

// Layer is the Layer of this package's errors: liberr.AsLayer(err, tools.Layer)
// finds a refusal of the JIT lifecycle in a chain.
const Layer = "tools"

const layer = Layer

// CandidateRef is the cause inside a lifecycle refusal about one candidate: its ID
// and, behind validation_failed, the validation evidence. Read it with errors.As.
type CandidateRef struct {
	ID string
	// Report is the validation evidence behind CodeValidationFailed.
	Report *Report
	Err    error
}

func (c *CandidateRef) Error() string {
	if c.Err != nil {
		return c.Err.Error()
	}
	return "candidate " + c.ID
}

// Unwrap returns the cause, if any.
func (c *CandidateRef) Unwrap() error { return c.Err }

// own returns the outermost error of this package in err's chain: a refusal made
// here, as opposed to a failure of the store or the kernel passed along.
func own(err error) (*Error, bool) { return liberr.AsLayer(err, layer) }

// Sentinels for errors.Is; they compare by code only.
var (
	ErrInvalidRequest    = sentinel(CodeInvalidRequest)
	ErrInvalidName       = sentinel(CodeInvalidName)
	ErrReservedName      = sentinel(CodeReservedName)
	ErrNameConflict      = sentinel(CodeNameConflict)
	ErrLimitExceeded     = sentinel(CodeLimitExceeded)
	ErrInvalidSchema     = sentinel(CodeInvalidSchema)
	ErrInvalidTest       = sentinel(CodeInvalidTest)
	ErrNotFound          = sentinel(CodeNotFound)
	ErrAlreadySettled    = sentinel(CodeAlreadySettled)
	ErrCandidateRejected = sentinel(CodeCandidateRejected)
	ErrAlreadyRegistered = sentinel(CodeAlreadyRegistered)
	ErrValidationFailed  = sentinel(CodeValidationFailed)
	ErrStorage           = sentinel(CodeStorage)
	ErrToolFailed        = sentinel(CodeToolFailed)
	ErrCallNotFound      = sentinel(CodeCallNotFound)
	ErrCallUnsettled     = sentinel(CodeCallUnsettled)
	ErrNotJITTool        = sentinel(CodeNotJITTool)
	ErrJournalTruncated  = sentinel(CodeJournalTruncated)
	ErrExportForbidden   = sentinel(CodeExportForbidden)
	ErrNotReplayable     = sentinel(CodeNotReplayable)
	ErrJournalCorrupt    = sentinel(CodeJournalCorrupt)
)

// sentinel, errorf and storageErr fix this package's layer (and storageErr its code)
// and nothing else: the constructors are liberr's (see RATIONALE.md, "One error
// constructor").
func sentinel(code Code) *Error { return liberr.New(layer, code, "") }

func errorf(code Code, format string, args ...any) *Error {
	return liberr.New(layer, code, format, args...)
}

func storageErr(what string, err error) *Error {
	return liberr.WrapQuoting(layer, CodeStorage, err, what)
}
