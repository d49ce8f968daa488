package syscalls

import (
	"errors"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

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
	CodeLimitExceeded = liberr.CodeLimitExceeded
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

	// CodeURLInvalid: a fetch URL (or a redirect's location) does not pass the strict
	// parse: not http(s), user information, an address in an unusual form, a
	// malformed host or port.
	CodeURLInvalid = "url_invalid"
	// CodeHostNotAllowed: the image grants no egress to the host (or to a redirect's
	// host), or no egress at all.
	CodeHostNotAllowed = "host_not_allowed"
	// CodeMethodNotAllowed: the image does not allow the fetch's HTTP method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeAddressNotAllowed: the host resolves only to addresses that are not public
	// (loopback, private, link-local, CGNAT, metadata, …) and that the image does not
	// name exactly.
	CodeAddressNotAllowed = "address_not_allowed"
	// CodeTooManyRedirects: a fetch was redirected more often than the image allows.
	CodeTooManyRedirects = "too_many_redirects"
	// CodeRequestTooLarge: a fetch's body is larger than the image allows.
	CodeRequestTooLarge = "request_too_large"
	// CodeResponseTooLarge: a response's body is larger than the image allows.
	CodeResponseTooLarge = "response_too_large"
	// CodeFetchTimeout: no complete response within the fetch's time limit (the
	// image's timeout or the call's own).
	CodeFetchTimeout = "fetch_timeout"
	// CodeFetchFailed: the connection or the HTTP exchange failed.
	CodeFetchFailed = "fetch_failed"
	// CodeSecretNotAllowed: a header names a secret the image does not declare, or one
	// that may not go to the fetch's host; or a placeholder is outside header values; or
	// the secret would travel in clear text (plain http to an address that is not
	// loopback, or a redirect from https to http).
	CodeSecretNotAllowed = "secret_not_allowed"
	// CodeSecretUnavailable: a declared secret has no usable value on the host (unset,
	// empty, not a header value, or its file is not a regular file of at most
	// MaxSecretFileBytes).
	CodeSecretUnavailable = "secret_unavailable"
	// CodeDataFlowDenied: a value carrying a label would reach a sink the image's
	// data-flow rules forbid for it.
	CodeDataFlowDenied = "data_flow_denied"
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
	ErrArgumentInvalid  = &Error{Code: CodeArgumentInvalid, Layer: Layer, Message: "argument invalid"}
	ErrCapabilityDenied = &Error{Code: CodeCapabilityDenied, Layer: Layer, Message: "capability denied"}
	ErrApprovalDenied   = &Error{Code: CodeApprovalDenied, Layer: Layer, Message: "approval denied"}
	ErrApprovalTimeout  = &Error{Code: CodeApprovalTimeout, Layer: Layer, Message: "approval timeout"}
	ErrBudgetExceeded   = &Error{Code: CodeBudgetExceeded, Layer: Layer, Message: "budget exceeded"}
	ErrLimitExceeded    = &Error{Code: CodeLimitExceeded, Layer: Layer, Message: "limit exceeded"}
	ErrProviderFailed   = &Error{Code: CodeProviderFailed, Layer: Layer, Message: "provider failed"}
	ErrAuditFailed      = &Error{Code: CodeAuditFailed, Layer: Layer, Message: "audit failed"}
	ErrTapeMismatch     = &Error{Code: CodeTapeMismatch, Layer: Layer, Message: "tape mismatch"}
	ErrTapeLeftover     = &Error{Code: CodeTapeLeftover, Layer: Layer, Message: "tape leftover"}
	ErrTapeInvalid      = &Error{Code: CodeTapeInvalid, Layer: Layer, Message: "tape invalid"}

	ErrURLInvalid        = &Error{Code: CodeURLInvalid, Layer: Layer, Message: "url invalid"}
	ErrHostNotAllowed    = &Error{Code: CodeHostNotAllowed, Layer: Layer, Message: "host not allowed"}
	ErrMethodNotAllowed  = &Error{Code: CodeMethodNotAllowed, Layer: Layer, Message: "method not allowed"}
	ErrAddressNotAllowed = &Error{Code: CodeAddressNotAllowed, Layer: Layer, Message: "address not allowed"}
	ErrTooManyRedirects  = &Error{Code: CodeTooManyRedirects, Layer: Layer, Message: "too many redirects"}
	ErrRequestTooLarge   = &Error{Code: CodeRequestTooLarge, Layer: Layer, Message: "request too large"}
	ErrResponseTooLarge  = &Error{Code: CodeResponseTooLarge, Layer: Layer, Message: "response too large"}
	ErrFetchTimeout      = &Error{Code: CodeFetchTimeout, Layer: Layer, Message: "fetch timeout"}
	ErrFetchFailed       = &Error{Code: CodeFetchFailed, Layer: Layer, Message: "fetch failed"}
	ErrSecretNotAllowed  = &Error{Code: CodeSecretNotAllowed, Layer: Layer, Message: "secret not allowed"}
	ErrSecretUnavailable = &Error{Code: CodeSecretUnavailable, Layer: Layer, Message: "secret unavailable"}
	ErrDataFlowDenied    = &Error{Code: CodeDataFlowDenied, Layer: Layer, Message: "data flow denied"}
)

// unknownSyscallMessage is the one text every unknown route gets, whatever its name:
// a guest cannot learn from it which routes exist or how close its guess was. It lacks
// the package prefix on purpose: the sandbox answers names it cannot route (too long,
// not UTF-8) with the same code and these same bytes, so the guest cannot even tell
// which layer refused.
const unknownSyscallMessage = "unknown syscall"

// guestError returns the outermost *Error of err when its code and message may reach
// the guest as they are: any but the store's. Every package's errors are one type, so
// a provider that returns a store failure unchanged would otherwise show the guest
// file paths and Pebble's words; such an error is the provider's failure instead, its
// cause kept in the audit event.
func guestError(err error) (*Error, bool) {
	var se *Error
	if !errors.As(err, &se) || se.Layer == store.Layer {
		return nil, false
	}
	return se, true
}

// errorf fixes this package's layer and nothing else: the constructor is liberr's (see
// RATIONALE.md, "One error constructor").
func errorf(code liberr.Code, msg string, cause error) *Error {
	return liberr.Wrap(Layer, code, cause, "%s", msg)
}

// Layer is the Layer of this package's errors: Error() renders them "syscalls: <msg>"
// while Message holds the text alone, so no reader strips a prefix off it. The one
// exception is the unknown_syscall error, which has no layer (see unknownSyscallMessage).
const Layer = "syscalls"

// reason is the text an audit event keeps for a refusal: what the error renders
// (with this layer's name) for this layer's errors, the message alone for any other
// layer's, as the audit log has always recorded them.
func reason(e *Error) string {
	if e.Layer == Layer {
		return e.Error()
	}
	return e.Message
}
