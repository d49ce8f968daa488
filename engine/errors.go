package engine

import "github.com/agentlibos/libos/liberr"

// Code is the stable machine code of an error. Models, audit events and embedders
// see the code; the message is for people.
type Code = liberr.Code

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
	CodeLimitExceeded = liberr.CodeLimitExceeded
	// CodeBudgetExceeded: the process has used its tool-call budget.
	CodeBudgetExceeded = liberr.CodeBudgetExceeded
	// CodeToolFailed: the handler returned an error without a code of its own.
	CodeToolFailed = liberr.CodeToolFailed
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
	CodeInvalidConfig = liberr.CodeInvalidConfig
	// CodeInvalidImage: an image manifest (or one of its Skills) is unusable; the
	// error's Details list every problem at once.
	CodeInvalidImage = liberr.CodeInvalidImage
	// CodeInvalidSkill: a SKILL.md document is unusable; Details list every problem.
	CodeInvalidSkill = liberr.CodeInvalidSkill
	// CodeUnknownSkill: the image ships no Skill of that name.
	CodeUnknownSkill Code = "unknown_skill"
	// CodeProcessPaused: the process is paused; the operator resumes it.
	CodeProcessPaused Code = "process_paused"
	// CodeApprovalDenied: the operator denied the call, or the approval found does
	// not apply to it (other arguments, another tool definition).
	CodeApprovalDenied = liberr.CodeApprovalDenied
	// CodeApprovalTimeout: no decision arrived in time; a timeout denies.
	CodeApprovalTimeout = liberr.CodeApprovalTimeout
	// CodeCanceled: the caller went away (Ctrl-C, a cancelled MCP request) while the
	// call waited; a pending approval it asked for expires with it.
	CodeCanceled = liberr.CodeCanceled
	// CodeNotFound: an operator request named a checkpoint, approval or binding that
	// does not exist.
	CodeNotFound = liberr.CodeNotFound
	// CodeInvalidState: the operation does not apply in the current state (a decided
	// approval decided again, a killed process resumed).
	CodeInvalidState Code = "invalid_state"
	// CodeClosed: the kernel is closed.
	CodeClosed Code = "kernel_closed"
	// CodeStorage: the durable store refused a write; the call is not acknowledged.
	CodeStorage = liberr.CodeStorage
)

// Error is the typed error of every engine operation: the module's one error type
// (package liberr), with Layer "engine". Test it with errors.Is against the Err*
// values (which compare by code, whichever layer made the error) or errors.As to read
// the details.
type Error = liberr.Error

// Detail is one finding inside an error, such as one schema violation.
type Detail = liberr.Detail

// Sentinels for errors.Is; they compare by code only.
var (
	ErrProtocolFrame   = sentinel(CodeProtocolFrame)
	ErrUnknownTool     = sentinel(CodeUnknownTool)
	ErrSchemaInvalid   = sentinel(CodeSchemaInvalid)
	ErrNotAllowed      = sentinel(CodeNotAllowed)
	ErrLimitExceeded   = sentinel(CodeLimitExceeded)
	ErrBudgetExceeded  = sentinel(CodeBudgetExceeded)
	ErrToolFailed      = sentinel(CodeToolFailed)
	ErrOutputInvalid   = sentinel(CodeOutputInvalid)
	ErrUnknownProcess  = sentinel(CodeUnknownProcess)
	ErrInvalidTool     = sentinel(CodeInvalidTool)
	ErrToolConflict    = sentinel(CodeToolConflict)
	ErrInvalidConfig   = sentinel(CodeInvalidConfig)
	ErrClosed          = sentinel(CodeClosed)
	ErrInvalidImage    = sentinel(CodeInvalidImage)
	ErrInvalidSkill    = sentinel(CodeInvalidSkill)
	ErrUnknownSkill    = sentinel(CodeUnknownSkill)
	ErrProcessPaused   = sentinel(CodeProcessPaused)
	ErrApprovalDenied  = sentinel(CodeApprovalDenied)
	ErrApprovalTimeout = sentinel(CodeApprovalTimeout)
	ErrNotFound        = sentinel(CodeNotFound)
	ErrInvalidState    = sentinel(CodeInvalidState)
	ErrStorage         = sentinel(CodeStorage)
)

// sentinel and errorf fix this package's layer and nothing else: the constructor is
// liberr's (see RATIONALE.md, "One error constructor").
func sentinel(code Code) *Error { return liberr.New(layer, code, "") }

// layer names this package in its errors.
const layer = "engine"

func errorf(code Code, format string, args ...any) *Error {
	return liberr.New(layer, code, format, args...)
}
