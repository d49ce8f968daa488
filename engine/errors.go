package engine

import "fmt"

// Code is the stable machine code of an engine error. Models, audit events and
// embedders see the code; the message is for people.
type Code string

// The codes a tool call can fail with. They are stable: tests, audit events and the
// model-facing error text use them.
const (
	// CodeProtocolFrame: the provider frame could not be normalised (malformed JSON,
	// non-object arguments, no usable function name, duplicate or case-variant keys,
	// invalid UTF-8, nesting too deep). Nothing was dispatched; the audit log has a
	// protocol_rejected event, never tool_called.
	CodeProtocolFrame Code = "protocol_frame"
	// CodeUnknownTool: the name is not in the process's projection (unknown, hidden,
	// a JIT name called directly in multiplexed mode, run_jit_tool in direct mode or
	// through the host API).
	CodeUnknownTool Code = "unknown_tool"
	// CodeSchemaInvalid: the arguments do not satisfy the tool's input schema.
	CodeSchemaInvalid Code = "schema_invalid"
	// CodeNotAllowed: the tool is in the process table but the visibility gate (the
	// process's allowed-tool set) refuses it.
	CodeNotAllowed Code = "tool_not_allowed"
	// CodeLimitExceeded: an argument or result exceeded its size limit.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeBudgetExceeded: the process has used its tool-call budget.
	CodeBudgetExceeded Code = "budget_exceeded"
	// CodeToolFailed: the handler returned an error without a code of its own.
	CodeToolFailed Code = "tool_failed"
	// CodeOutputInvalid: the handler returned something that is not exact JSON or that
	// does not satisfy the tool's output schema.
	CodeOutputInvalid Code = "output_invalid"
	// CodeUnknownProcess: no live process has that PID.
	CodeUnknownProcess Code = "unknown_process"
	// CodeInvalidTool: a tool definition is unusable (bad name, schema that does not
	// compile, missing handler).
	CodeInvalidTool Code = "invalid_tool"
	// CodeToolConflict: installing a tool whose name is already in the process table,
	// or removing one that is not there.
	CodeToolConflict Code = "tool_conflict"
	// CodeInvalidConfig: a Spawn or Open configuration is unusable.
	CodeInvalidConfig Code = "invalid_config"
	// CodeInvalidImage: an image manifest (or one of its Skills) is unusable; the
	// error's Details list every problem at once.
	CodeInvalidImage Code = "invalid_image"
	// CodeInvalidSkill: a SKILL.md document is unusable; Details list every problem.
	CodeInvalidSkill Code = "invalid_skill"
	// CodeUnknownSkill: the image ships no Skill of that name.
	CodeUnknownSkill Code = "unknown_skill"
	// CodeProcessPaused: the process is paused; the operator resumes it.
	CodeProcessPaused Code = "process_paused"
	// CodeApprovalDenied: the operator denied the call, or the approval found does
	// not apply to it (other arguments, another tool definition).
	CodeApprovalDenied Code = "approval_denied"
	// CodeApprovalTimeout: no decision arrived in time; a timeout denies.
	CodeApprovalTimeout Code = "approval_timeout"
	// CodeNotFound: an operator request named a checkpoint, approval or binding that
	// does not exist.
	CodeNotFound Code = "not_found"
	// CodeInvalidState: the operation does not apply in the current state (a decided
	// approval decided again, a killed process resumed).
	CodeInvalidState Code = "invalid_state"
	// CodeClosed: the kernel is closed.
	CodeClosed Code = "kernel_closed"
	// CodeStorage: the durable store refused a write; the call is not acknowledged.
	CodeStorage Code = "storage_failed"
)

// Error is the typed error of every engine operation. Test it with errors.Is against
// the Err* values (which compare by code) or errors.As to read the details.
type Error struct {
	Code    Code
	Message string // starts without the "engine: " prefix; Error() adds it
	// Tool is the tool name involved, when there is one.
	Tool string
	// Details lists individual findings (schema violations), as data.
	Details []Detail
	Err     error
}

// Detail is one finding inside an error, such as one schema violation.
type Detail struct {
	Path    string `json:"path"` // JSON Pointer into the instance
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "engine: " + string(e.Code)
	}
	return "engine: " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable machine code. Errors from other packages that implement
// ErrorCode() string keep their code when a handler returns them.
func (e *Error) ErrorCode() string { return string(e.Code) }

// Is matches another *Error with the same code, so errors.Is(err, ErrUnknownTool) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; they compare by code only.
var (
	ErrProtocolFrame   = &Error{Code: CodeProtocolFrame}
	ErrUnknownTool     = &Error{Code: CodeUnknownTool}
	ErrSchemaInvalid   = &Error{Code: CodeSchemaInvalid}
	ErrNotAllowed      = &Error{Code: CodeNotAllowed}
	ErrLimitExceeded   = &Error{Code: CodeLimitExceeded}
	ErrBudgetExceeded  = &Error{Code: CodeBudgetExceeded}
	ErrToolFailed      = &Error{Code: CodeToolFailed}
	ErrOutputInvalid   = &Error{Code: CodeOutputInvalid}
	ErrUnknownProcess  = &Error{Code: CodeUnknownProcess}
	ErrInvalidTool     = &Error{Code: CodeInvalidTool}
	ErrToolConflict    = &Error{Code: CodeToolConflict}
	ErrInvalidConfig   = &Error{Code: CodeInvalidConfig}
	ErrClosed          = &Error{Code: CodeClosed}
	ErrInvalidImage    = &Error{Code: CodeInvalidImage}
	ErrInvalidSkill    = &Error{Code: CodeInvalidSkill}
	ErrUnknownSkill    = &Error{Code: CodeUnknownSkill}
	ErrProcessPaused   = &Error{Code: CodeProcessPaused}
	ErrApprovalDenied  = &Error{Code: CodeApprovalDenied}
	ErrApprovalTimeout = &Error{Code: CodeApprovalTimeout}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrInvalidState    = &Error{Code: CodeInvalidState}
	ErrStorage         = &Error{Code: CodeStorage}
)

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the machine code of err: the code of the outermost error in its
// chain that has one (the Code of an *Error, or the ErrorCode() of any error with that
// method), "" for nil, and tool_failed for any other error (the code a handler's
// untyped error settles with).
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	if c := outermostCoded(err); c != nil {
		return c.ErrorCode()
	}
	return string(CodeToolFailed)
}

type codedError interface {
	error
	ErrorCode() string
}

// outermostCoded returns the first error in err's chain, in the order errors.As
// searches it, whose ErrorCode() is not empty; nil when there is none. An error that
// wraps a coded error is what the handler meant: its code wins over the wrapped one.
func outermostCoded(err error) codedError {
	for err != nil {
		if c, ok := err.(codedError); ok && c.ErrorCode() != "" {
			return c
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if c := outermostCoded(inner); c != nil {
					return c
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}
