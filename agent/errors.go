package agent

import (
	"errors"
	"fmt"
)

// Code is the stable machine code of an agent error.
type Code string

const (
	// CodeProviderRateLimited: the provider answered 429 on every attempt the retry
	// bound allowed.
	CodeProviderRateLimited Code = "provider_rate_limited"
	// CodeProviderUnavailable: a 5xx answer past the retry bound, or no connection.
	CodeProviderUnavailable Code = "provider_unavailable"
	// CodeProviderTimeout: the request did not finish within its timeout.
	CodeProviderTimeout Code = "provider_timeout"
	// CodeProviderAuth: the provider refused the credentials (401, 403).
	CodeProviderAuth Code = "provider_auth"
	// CodeProviderRejected: the provider refused the request itself (another 4xx).
	CodeProviderRejected Code = "provider_rejected"
	// CodeProviderRefused: the model refused to answer (a refusal, a content filter).
	CodeProviderRefused Code = "provider_refused"
	// CodeProviderBadResponse: the answer could not be used (no choice, no content,
	// a stream that ended early).
	CodeProviderBadResponse Code = "provider_bad_response"
	// CodeNotResumable: a run cannot be resumed exactly (finished, unknown, or a
	// message of it was stored as a digest only).
	CodeNotResumable Code = "agent_not_resumable"
	// CodeInvalidConfig: the loop's configuration is unusable.
	CodeInvalidConfig Code = "invalid_config"
	// CodeCancelled: the run was cancelled (Ctrl-C, the context).
	CodeCancelled Code = "cancelled"
	// CodeStorage: the log refused a write; the loop stops before going on.
	CodeStorage Code = "storage_failed"
)

// Error is the typed error of the provider path.
type Error struct {
	Code    Code
	Message string
	// Status is the provider's HTTP status, when there was one.
	Status int
	// Attempts is how many HTTP attempts the request took, retries included.
	Attempts int
	Err      error
}

func (e *Error) Error() string { return "agent: " + string(e.Code) + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return string(e.Code) }

// Is matches another *Error by code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Message == ""
}

// Sentinels for errors.Is.
var (
	ErrProviderRateLimited = &Error{Code: CodeProviderRateLimited}
	ErrProviderUnavailable = &Error{Code: CodeProviderUnavailable}
	ErrProviderTimeout     = &Error{Code: CodeProviderTimeout}
	ErrProviderAuth        = &Error{Code: CodeProviderAuth}
	ErrProviderRejected    = &Error{Code: CodeProviderRejected}
	ErrProviderRefused     = &Error{Code: CodeProviderRefused}
	ErrProviderBadResponse = &Error{Code: CodeProviderBadResponse}
	ErrNotResumable        = &Error{Code: CodeNotResumable}
	ErrCancelled           = &Error{Code: CodeCancelled}
)

func errorf(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// CodeOf returns the stable code of err, or "" when it carries none.
func CodeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}
