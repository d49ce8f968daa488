package agent

import (
	"errors"
	"fmt"

	"github.com/agentlibos/libos/liberr"
)

// layer names this package in its errors.
const layer = "agent"

// The codes of the provider path (registered in liberr, listed in ERRORS.md).
const (
	// CodeProviderRateLimited: the provider answered 429 on every attempt the retry
	// bound allowed, or asked for a wait the loop does not make.
	CodeProviderRateLimited liberr.Code = "provider_rate_limited"
	// CodeProviderUnavailable: a 5xx answer past the retry bound, or no connection.
	CodeProviderUnavailable liberr.Code = "provider_unavailable"
	// CodeProviderTimeout: the request did not finish within its timeout.
	CodeProviderTimeout liberr.Code = "provider_timeout"
	// CodeProviderAuth: the provider refused the credentials (401, 403).
	CodeProviderAuth liberr.Code = "provider_auth"
	// CodeProviderRejected: the provider refused the request itself (another 4xx).
	CodeProviderRejected liberr.Code = "provider_rejected"
	// CodeProviderRefused: the model refused to answer (a refusal, a content filter).
	CodeProviderRefused liberr.Code = "provider_refused"
	// CodeProviderBadResponse: the answer could not be used (no choice, a tool call
	// of an unknown type, a stream cut before its end, a 2xx body that cannot be
	// read, a body over MaxResponseBytes, a redirect).
	CodeProviderBadResponse liberr.Code = "provider_bad_response"
	// CodeNotResumable: a run cannot be resumed exactly (finished, unknown, or a
	// message of it was stored as a digest only).
	CodeNotResumable liberr.Code = "agent_not_resumable"
	// CodeInvalidConfig: the loop's configuration is unusable.
	CodeInvalidConfig liberr.Code = liberr.CodeInvalidConfig
	// CodeCanceled: the run was cancelled (Ctrl-C, the context).
	CodeCanceled liberr.Code = liberr.CodeCanceled
	// CodeStorage: the log refused a write; the loop stops before going on.
	CodeStorage liberr.Code = liberr.CodeStorage
	// codeUnknownSettlement is what the model is told of a call dispatched before a
	// stop whose outcome was never recorded.
	codeUnknownSettlement liberr.Code = "unknown_settlement"
)

// Sentinels for errors.Is (they match any error of the same code).
var (
	ErrProviderRateLimited = liberr.New(layer, CodeProviderRateLimited, "")
	ErrProviderUnavailable = liberr.New(layer, CodeProviderUnavailable, "")
	ErrProviderTimeout     = liberr.New(layer, CodeProviderTimeout, "")
	ErrProviderAuth        = liberr.New(layer, CodeProviderAuth, "")
	ErrProviderRejected    = liberr.New(layer, CodeProviderRejected, "")
	ErrProviderRefused     = liberr.New(layer, CodeProviderRefused, "")
	ErrProviderBadResponse = liberr.New(layer, CodeProviderBadResponse, "")
	ErrNotResumable        = liberr.New(layer, CodeNotResumable, "")
	ErrCanceled            = liberr.New(layer, CodeCanceled, "")
)

// ProviderFailure is the cause inside a provider error: the HTTP status of the last
// attempt (0 when none answered) and how many attempts were made. Err is what the SDK
// or the transport said, as text with the API key and the base URL's password
// redacted: the SDK's own error value holds the request, and with it the credentials.
type ProviderFailure struct {
	Status   int
	Attempts int
	Err      error
}

func (f *ProviderFailure) Error() string {
	if f.Err == nil {
		return fmt.Sprintf("HTTP %d after %d attempts", f.Status, f.Attempts)
	}
	return f.Err.Error()
}

// Unwrap returns the failure's text as an error.
func (f *ProviderFailure) Unwrap() error { return f.Err }

// FailureOf returns the provider failure inside err, if any.
func FailureOf(err error) (*ProviderFailure, bool) {
	var f *ProviderFailure
	ok := errors.As(err, &f)
	return f, ok
}

func errorf(code liberr.Code, cause error, format string, args ...any) *liberr.Error {
	return liberr.Wrap(layer, code, cause, format, args...)
}

func providerErr(code liberr.Code, status, attempts int, cause error, format string, args ...any) *liberr.Error {
	return liberr.Wrap(layer, code, &ProviderFailure{Status: status, Attempts: attempts, Err: cause}, format, args...)
}
