package syscalls

import "github.com/agentlibos/libos/liberr"

// Codes are the stable machine codes a syscall can fail with. They reach the guest as
// the code of the rejected Promise and the audit log as the reason of a denial.
const (
	// CodeUnknownSyscall: the route does not exist. The message is fixed and reveals
	// nothing about which routes exist.
	CodeUnknownSyscall = "unknown_syscall"
	// CodeArgumentInvalid: the arguments do not match the route's argument schema, or a
	// bound the schema cannot express (byte sizes, time zone names, cursors).
	CodeArgumentInvalid = "argument_invalid"
	// CodeCapabilityDenied: the calling process does not hold the route's capability.
	CodeCapabilityDenied = "capability_denied"
	// CodeApprovalDenied: the operator (or an approval policy) said no, or no approver
	// is available for a route that needs one.
	CodeApprovalDenied = "approval_denied"
	// CodeApprovalTimeout: no approval decision arrived before the call's deadline.
	CodeApprovalTimeout = "approval_timeout"
	// CodeBudgetExceeded: a durable budget of the process is spent.
	CodeBudgetExceeded = "budget_exceeded"
	// CodeLimitExceeded: a structural bound was hit (tools.call depth).
	CodeLimitExceeded = "limit_exceeded"
	// CodeProviderFailed: the provider failed, or returned a result that does not match
	// the route's result schema.
	CodeProviderFailed = "provider_failed"
	// CodeAuditFailed: the decision could not be recorded; nothing unaudited is
	// acknowledged, so the call fails.
	CodeAuditFailed = "audit_failed"
	// CodeTapeMismatch: under a tape, the call did not match the next entry (name,
	// arguments, or there was no entry left).
	CodeTapeMismatch = "tape_mismatch"
	// CodeTapeLeftover: under a tape, entries were left unconsumed when the run ended.
	CodeTapeLeftover = "tape_leftover"
	// CodeTapeInvalid: a tape entry is malformed.
	CodeTapeInvalid = "tape_invalid"
)

// Error is a syscall failure: the module's one error type. Its code reaches the guest
// as the code of the rejected Promise and the audit log as the reason of a denial;
// errors.Is matches any error with the same code, so the sentinels below work as
// targets: errors.Is(err, syscalls.ErrCapabilityDenied). Err, the cause, is never
// shown to the guest.
type Error = liberr.Error

// Sentinels, one per code, for errors.Is.
var (
	ErrUnknownSyscall   = &Error{Code: CodeUnknownSyscall, Message: unknownSyscallMessage}
	ErrArgumentInvalid  = &Error{Code: CodeArgumentInvalid, Message: "syscalls: argument invalid"}
	ErrCapabilityDenied = &Error{Code: CodeCapabilityDenied, Message: "syscalls: capability denied"}
	ErrApprovalDenied   = &Error{Code: CodeApprovalDenied, Message: "syscalls: approval denied"}
	ErrApprovalTimeout  = &Error{Code: CodeApprovalTimeout, Message: "syscalls: approval timeout"}
	ErrBudgetExceeded   = &Error{Code: CodeBudgetExceeded, Message: "syscalls: budget exceeded"}
	ErrLimitExceeded    = &Error{Code: CodeLimitExceeded, Message: "syscalls: limit exceeded"}
	ErrProviderFailed   = &Error{Code: CodeProviderFailed, Message: "syscalls: provider failed"}
	ErrAuditFailed      = &Error{Code: CodeAuditFailed, Message: "syscalls: audit failed"}
	ErrTapeMismatch     = &Error{Code: CodeTapeMismatch, Message: "syscalls: tape mismatch"}
	ErrTapeLeftover     = &Error{Code: CodeTapeLeftover, Message: "syscalls: tape leftover"}
	ErrTapeInvalid      = &Error{Code: CodeTapeInvalid, Message: "syscalls: tape invalid"}
)

// unknownSyscallMessage is the one text every unknown route gets, whatever its name:
// a guest cannot learn from it which routes exist or how close its guess was. It lacks
// the package prefix on purpose: the sandbox answers names it cannot route (too long,
// not UTF-8) with the same code and these same bytes, so the guest cannot even tell
// which layer refused.
const unknownSyscallMessage = "unknown syscall"

func errorf(code liberr.Code, msg string, cause error) *Error {
	return &Error{Code: code, Message: "syscalls: " + msg, Err: cause}
}
