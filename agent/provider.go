package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
)

// Usage is the token usage of one model request, or of a run.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Total is input plus output tokens, at most the largest int64.
func (u Usage) Total() int64 {
	u = u.floor()
	return saturatingAdd(u.Input, u.Output)
}

// add sums two usages. A provider's counts are not trusted to be sane: a negative one
// counts as 0 (it would give budget back) and a sum stops at the largest int64 instead
// of wrapping to a negative total that no budget ever reaches.
func (u Usage) add(v Usage) Usage {
	u, v = u.floor(), v.floor()
	return Usage{Input: saturatingAdd(u.Input, v.Input), Output: saturatingAdd(u.Output, v.Output)}
}

// usageOf is the usage a provider reported, each count floored at 0.
func usageOf(input, output int64) Usage { return Usage{Input: input, Output: output}.floor() }

func (u Usage) floor() Usage { return Usage{Input: max(u.Input, 0), Output: max(u.Output, 0)} }

// saturatingAdd adds two counts that are not negative, stopping at the largest int64.
func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ToolCall is one tool call of a model answer.
type ToolCall struct {
	// ID is the provider's identifier of the call, echoed in its result.
	ID string `json:"id"`
	// Name is the function name as the model wrote it (before the adapter trims it).
	Name string `json:"name"`
	// Frame is the call as the provider sent it, handed to the kernel's adapter as is:
	// {"id","type":"function","function":{"name","arguments":"<the model's string>"}}
	// for OpenAI, {"type":"tool_use","id","name","input":{…}} for Anthropic.
	Frame json.RawMessage `json:"frame"`
}

// Turn is the model's answer to one request.
type Turn struct {
	// Message is the answer as an assistant message of the provider's own
	// conversation format, to send back in the next request.
	Message json.RawMessage
	Text    string
	Calls   []ToolCall
	Usage   Usage
	// Stop is the provider's finish or stop reason.
	Stop string
	// Attempts is the number of HTTP attempts the request took.
	Attempts int
}

// Outcome is what one tool call came to, as the model will read it.
type Outcome struct {
	Call ToolCall
	// CallID is the kernel's call ID ("" when the frame was refused before dispatch
	// or the settlement is unknown).
	CallID string
	// Code is the typed error code of a failed call; "" on success.
	Code string
	// Text is the content handed back: the result's canonical JSON text, or the error.
	Text string
}

// Request is one model request.
type Request struct {
	Model  string
	System string
	// Messages is the conversation so far, in the provider's own message format.
	Messages []json.RawMessage
	// Tools is the projection rendered for the provider (engine.RenderTools).
	Tools json.RawMessage
}

// Provider is one model API.
type Provider interface {
	// Name is "openai" or "anthropic".
	Name() string
	// Rendering is the tool-definition format this provider reads.
	Rendering() render.Provider
	// Send sends one request; with streaming on, text deltas go to onText as they come.
	Send(ctx context.Context, req Request, onText func(string)) (*Turn, error)
	// UserMessage is a user message in the provider's format.
	UserMessage(text string) (json.RawMessage, error)
	// ToolResults are the messages that answer a turn's tool calls, in call order.
	ToolResults(outs []Outcome) ([]json.RawMessage, error)
}

// ProviderConfig configures a Provider.
type ProviderConfig struct {
	// Kind is "openai" (chat completions, any OpenAI-compatible server) or "anthropic".
	Kind string
	// BaseURL is the API's base URL; empty: the SDK's default (or OPENAI_BASE_URL /
	// ANTHROPIC_BASE_URL, which the CLI reads).
	BaseURL string
	// APIKey is handed to the SDK only; it is never logged or stored.
	APIKey string
	// MaxRetries bounds the retries of a request that got a 408, 409, 429 or 5xx
	// answer or no connection; 0 means the default of 2, a negative value no retry.
	// The retries and the waits between them are the loop's own (the SDKs' are off):
	// a wait is the one the provider asks for (Retry-After) or a backoff, never more
	// than a minute nor past Timeout (the request then fails with the last answer),
	// and it ends when the context does.
	MaxRetries int
	// Timeout bounds one request, its retries and the waits between them included;
	// 0 means 2 minutes.
	Timeout time.Duration
	// Stream asks for a streamed answer (text deltas reach the observer as they come).
	Stream bool
	// MaxTokens bounds one answer (Anthropic requires it); 0 means 4096.
	MaxTokens int64
	// MaxResponseBytes bounds the body of each answer, an error's included; a larger
	// one is provider_bad_response. 0 means 32 MiB.
	MaxResponseBytes int64
	// HTTPClient replaces the SDK's default client. Whatever its CheckRedirect says,
	// a redirect is not followed: it is provider_bad_response (the request and its
	// credentials go to BaseURL only).
	HTTPClient *http.Client
}

func (c ProviderConfig) withDefaults() ProviderConfig {
	if c.MaxRetries == 0 {
		c.MaxRetries = 2
	} else if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 4096
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 32 << 20
	}
	return c
}

// httpClient is the client a provider's SDK uses: cfg.HTTPClient or a default one,
// that hands a redirect back as the answer instead of following it (the exchange
// refuses it).
func httpClient(cfg ProviderConfig) *http.Client {
	c := &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		c = &copied
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Providers lists the provider kinds NewProvider knows.
var Providers = []string{"openai", "anthropic"}

// NewProvider returns the provider of cfg.Kind.
func NewProvider(cfg ProviderConfig) (Provider, error) {
	cfg = cfg.withDefaults()
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errorf(CodeInvalidConfig, err, "base URL %q is not an http(s) URL", cfg.BaseURL)
		}
	}
	switch cfg.Kind {
	case "openai":
		return newOpenAI(cfg), nil
	case "anthropic":
		return newAnthropic(cfg), nil
	}
	return nil, errorf(CodeInvalidConfig, nil, "unknown provider %q (want %s)", cfg.Kind, strings.Join(Providers, " or "))
}

// exchange follows one request through a provider's SDK: it makes the HTTP attempts
// (the retries are its own), counts them and keeps the status of the last answer.
// Both providers type their failures through it, so a 429 or a timeout reads the same
// whichever SDK met it.
type exchange struct {
	name string
	// apiStatus reads the HTTP status out of the SDK's own error type, when err is one.
	apiStatus  func(err error) (int, bool)
	maxRetries int
	maxBody    int64
	n          atomic.Int32
	status     atomic.Int32
	// refused is the exchange's own refusal of an answer (a redirect, a body over
	// the bound), which the SDK reports as it sees fit: fail returns it as is.
	refused atomic.Pointer[liberr.Error]
}

func newExchange(name string, cfg ProviderConfig, apiStatus func(error) (int, bool)) *exchange {
	return &exchange{name: name, apiStatus: apiStatus, maxRetries: cfg.MaxRetries, maxBody: cfg.MaxResponseBytes}
}

// refuse records e as the failure of the exchange and returns it.
func (x *exchange) refuse(e *liberr.Error) *liberr.Error {
	x.refused.CompareAndSwap(nil, e)
	return e
}

// Bounds of the waits between attempts: the backoff doubles from backoffBase up to
// backoffMax, and a wait the provider asks for over maxRetryWait ends the retries.
const (
	backoffBase  = 500 * time.Millisecond
	backoffMax   = 8 * time.Second
	maxRetryWait = time.Minute
)

// roundTrip is the SDK middleware of the exchange. The SDK makes one attempt (its
// retries are off); this makes every attempt the retry bound allows, waiting between
// them as retryWait says, and hands the SDK the last answer.
func (x *exchange) roundTrip(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	for retry := 0; ; retry++ {
		x.n.Add(1)
		resp, err := next(req)
		if resp != nil {
			x.status.Store(int32(resp.StatusCode))
		}
		if err == nil && resp.StatusCode >= 300 && resp.StatusCode < 400 {
			resp.Body.Close()
			return nil, x.refuse(providerErr(CodeProviderBadResponse, resp.StatusCode, x.attempts(), nil,
				"%s answered with a redirect (HTTP %d to %q), which is not followed: the base URL must name the API itself",
				x.name, resp.StatusCode, liberr.Clip(resp.Header.Get("Location"), 300)))
		}
		wait, again := x.retryWait(req, resp, err, retry)
		if !again {
			if resp != nil {
				resp.Body = &boundedBody{rc: resp.Body, left: x.maxBody, x: x}
			}
			return resp, err
		}
		if resp != nil {
			// Read a little of the body so the connection can be reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
		if req.Header.Get("X-Stainless-Retry-Count") != "" {
			req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(retry+1))
		}
	}
}

// retryWait says whether the attempt that got resp (or err) is retried, and after how
// long: a 408, 409, 429 or 5xx answer (unless it says x-should-retry: false) or no
// connection, while the retry bound allows, after the wait the provider asks for or
// the backoff. A wait over maxRetryWait or past the request's deadline is not made:
// the last answer stands.
func (x *exchange) retryWait(req *http.Request, resp *http.Response, err error, retry int) (time.Duration, bool) {
	if retry >= x.maxRetries || req.Context().Err() != nil || (req.Body != nil && req.GetBody == nil) {
		return 0, false
	}
	wait := min(backoffBase<<retry, backoffMax)
	if err != nil || resp == nil {
		return wait, x.fits(req, wait)
	}
	switch resp.Header.Get("x-should-retry") {
	case "false":
		return 0, false
	case "true":
	default:
		s := resp.StatusCode
		if s != http.StatusRequestTimeout && s != http.StatusConflict && s != http.StatusTooManyRequests && s < 500 {
			return 0, false
		}
	}
	if asked, ok := retryAfter(resp.Header); ok {
		wait = asked
	}
	return wait, x.fits(req, wait)
}

// fits reports whether a wait is within the bound and ends before the request's
// deadline (Timeout covers the retries).
func (x *exchange) fits(req *http.Request, wait time.Duration) bool {
	if wait > maxRetryWait {
		return false
	}
	if d, ok := req.Context().Deadline(); ok && time.Until(d) <= wait {
		return false
	}
	return true
}

// retryAfter is the wait an answer asks for: Retry-After-Ms (milliseconds), else
// Retry-After (seconds, or an HTTP date).
func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if sec, err := strconv.ParseFloat(v, 64); err == nil && sec >= 0 && sec < float64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(sec * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0), true
		}
	}
	return 0, false
}

// boundedBody is an answer's body that fails, typed, past maxBody bytes.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	x    *exchange
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the bound: the body may end exactly there.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, b.x.refuse(providerErr(CodeProviderBadResponse, int(b.x.status.Load()), b.x.attempts(), nil,
			"%s answer is larger than MaxResponseBytes (%d bytes)", b.x.name, b.x.maxBody))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// attempts is the number of HTTP attempts so far.
func (x *exchange) attempts() int { return int(x.n.Load()) }

// fail types an SDK or transport failure of the exchange: the status the SDK's error
// carries, else that of the last answer the middleware saw (0 when none answered).
func (x *exchange) fail(ctx context.Context, err error) *liberr.Error {
	if e := x.refused.Load(); e != nil {
		return e
	}
	status := int(x.status.Load())
	if s, ok := x.apiStatus(err); ok {
		status = s
	}
	return providerError(ctx, x.name, status, x.attempts(), err)
}

// badResponse is the error of an answer that came but cannot be used.
func (x *exchange) badResponse(cause error, msg string) *liberr.Error {
	return providerErr(CodeProviderBadResponse, 0, x.attempts(), cause, "%s", msg)
}

// toolsSet reports whether req carries tools to send: the projection exactly as the
// engine rendered it (strict subset included), or nothing.
func (req Request) toolsSet() bool { return len(req.Tools) > 0 && string(req.Tools) != "[]" }

// providerError types an SDK or transport failure. status is the HTTP status of the
// last attempt (0 when none answered), n the number of attempts.
func providerError(ctx context.Context, name string, status int, n int, err error) *liberr.Error {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return providerErr(CodeCanceled, status, n, err, "%s request cancelled", name)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return providerErr(CodeProviderTimeout, status, n, err, "%s request timed out", name)
	case status >= 200 && status < 300:
		// The provider answered, with something the SDK could not read.
		return providerErr(CodeProviderBadResponse, status, n, err, "%s answer cannot be read: %s", name, liberr.Clip(err.Error(), 300))
	case status == http.StatusTooManyRequests:
		return providerErr(CodeProviderRateLimited, status, n, err, "%s answered 429 (rate limited) after %d attempts", name, n)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return providerErr(CodeProviderAuth, status, n, err, "%s refused the credentials (HTTP %d)", name, status)
	case status >= 500:
		return providerErr(CodeProviderUnavailable, status, n, err, "%s answered HTTP %d after %d attempts", name, status, n)
	case status >= 400:
		return providerErr(CodeProviderRejected, status, n, err, "%s refused the request (HTTP %d): %s", name, status, liberr.Clip(err.Error(), 300))
	}
	return providerErr(CodeProviderUnavailable, status, n, err, "%s is unreachable: %s", name, liberr.Clip(err.Error(), 300))
}
