package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlibos/libos/agent"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
)

// apiServer is a model API played by handler on a loopback server; it returns the
// base URL the provider kind is configured with, with userinfo when it is not "".
func apiServer(t *testing.T, kind, userinfo string, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	u := srv.URL
	if userinfo != "" {
		u = strings.Replace(u, "://", "://"+userinfo+"@", 1)
	}
	if kind == "openai" {
		u += "/v1"
	}
	return u
}

// writeAnswer writes step as the provider's answer to r: a streamed one when r asks
// for a stream, else one JSON body.
func writeAnswer(w http.ResponseWriter, r *http.Request, kind string, step scriptStep) {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	switch {
	case req.Stream && kind == "openai":
		writeOpenAI(w, step)
	case req.Stream:
		writeAnthropic(w, step)
	default:
		body := openAICompletion(step)
		if kind == "anthropic" {
			body = anthropicMessage(step)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}
}

// errorBody is the provider's error object with message.
func errorBody(kind, message string) []byte {
	var v any = map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "code": nil}}
	if kind == "anthropic" {
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": message}}
	}
	b, _ := json.Marshal(v)
	return b
}

// texts is every text err shows: its own and that of each cause in its chain.
func texts(err error) []string {
	var out []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		out = append(out, e.Error())
	}
	return out
}

const (
	testKey      = "sk-test-secret-key-0123456789"
	testPassword = "pw-hunter2-secret"
)

// "API keys are passed to the SDK only: they are never written to the log", and no
// more may an error carry them: a provider that echoes the key or the base URL's
// password gets them redacted from the error, its cause and the provider_failed
// event, including a key that the message's clip cut in half.
func TestProviderErrorsRedactCredentials(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			// The key repeated with a padding in front: one of the paddings puts a
			// key across the clip of the message, whatever the length of the URL
			// before it.
			var pad int
			status := http.StatusBadRequest
			base := apiServer(t, v.kind, "user:"+testPassword, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(errorBody(v.kind, "Incorrect API key provided:"+strings.Repeat(" ", pad)+strings.Repeat(testKey+" ", 20)))
			})
			p, err := agent.NewProvider(agent.ProviderConfig{Kind: v.kind, BaseURL: base, APIKey: testKey, Stream: v.stream, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			halfKey := false
			for _, st := range []int{http.StatusBadRequest, http.StatusUnauthorized} {
				for _, pad = range []int{0, 7, 14, 21} {
					status = st
					_, err := agent.Run(context.Background(), config(w, p), "hi")
					if liberr.CodeOf(err) == "" {
						t.Fatalf("HTTP %d: err %v, want a typed provider error", st, err)
					}
					for _, s := range texts(err) {
						if strings.Contains(s, testKey[:4]) || strings.Contains(s, testPassword[:4]) {
							t.Errorf("HTTP %d, padding %d: the error shows a credential: %s", st, pad, s)
						}
						halfKey = halfKey || strings.HasSuffix(s, "{{secret:api_key}}"+liberr.ClipMark)
					}
				}
			}
			if !halfKey {
				t.Error("no message was clipped within a key: the case of a key cut in half was not exercised")
			}
			failed := w.events(t, agent.EventFailed)
			if len(failed) != 8 {
				t.Fatalf("%d provider_failed events, want 8", len(failed))
			}
			for _, e := range w.events(t, "") {
				if s := string(e.Data); strings.Contains(s, testKey[:4]) || strings.Contains(s, testPassword[:4]) {
					t.Errorf("event %s shows a credential: %s", e.Type, s)
				}
			}
			if !strings.Contains(fmt.Sprint(string(failed[0].Data)), "{{secret:api_key}}") {
				t.Errorf("provider_failed %s does not say a secret was redacted", failed[0].Data)
			}
		})
	}
}

// scripted serves steps in order as the provider's answers, counts the requests and
// keeps the last one's body.
type scripted struct {
	steps    []scriptStep
	requests atomic.Int32
	last     atomic.Value
}

func (s *scripted) handler(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.last.Store(string(b))
		r.Body = io.NopCloser(bytes.NewReader(b))
		n := int(s.requests.Add(1))
		if n > len(s.steps) {
			http.Error(w, "script exhausted", http.StatusInternalServerError)
			return
		}
		writeAnswer(w, r, kind, s.steps[n-1])
	}
}

// newProvider is a provider of variant v at base, with the test key and no retry.
func newProvider(t *testing.T, v variant, base string, cfg agent.ProviderConfig) agent.Provider {
	t.Helper()
	cfg.Kind, cfg.BaseURL, cfg.Stream = v.kind, base, v.stream
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = -1
	}
	p, err := agent.NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func echoStep(id string, n int, in, out int64) scriptStep {
	st := scriptStep{Calls: []scriptCall{{ID: id, Name: "echo", Arguments: fmt.Sprintf(`{"n":%d}`, n)}}}
	st.Usage.Input, st.Usage.Output = in, out
	return st
}

// "--budget-tokens stops the loop cleanly", whatever the provider reports: "counts
// floor at 0 and sums saturate at the maximum instead of wrapping". A negative count
// gives no budget back, and a count near the int64 bound does not wrap the total to
// a negative number no budget reaches.
func TestUsageFloorsAndSaturates(t *testing.T) {
	const maxInt64 = 1<<63 - 1
	cases := []struct {
		name      string
		steps     []scriptStep
		wantSteps int
		want      agent.Usage
	}{
		{"negative", []scriptStep{echoStep("c1", 1, -1000, 80), echoStep("c2", 2, 0, 80), {Text: "past the budget"}}, 2, agent.Usage{Input: 0, Output: 160}},
		{"overflow", []scriptStep{echoStep("c1", 1, maxInt64, 10), echoStep("c2", 2, maxInt64, 10), {Text: "past the budget"}}, 1, agent.Usage{Input: maxInt64, Output: 10}},
	}
	for _, v := range variants {
		for _, c := range cases {
			t.Run(v.String()+"/"+c.name, func(t *testing.T) {
				w := openWorld(t, t.TempDir(), engine.Direct)
				s := &scripted{steps: c.steps}
				cfg := config(w, newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{}))
				cfg.BudgetTokens = 150
				rep, err := agent.Run(context.Background(), cfg, "loop")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Reason != agent.ReasonBudget || rep.Steps != c.wantSteps || rep.Usage != c.want {
					t.Fatalf("report %+v, want %s after %d steps with usage %+v", rep, agent.ReasonBudget, c.wantSteps, c.want)
				}
				if rep.Usage.Total() < 0 {
					t.Errorf("total %d is negative", rep.Usage.Total())
				}
			})
		}
	}
}

// failing answers every request with status and the given headers, and counts them.
type failing struct {
	status   int
	header   map[string]string
	requests atomic.Int32
}

func (f *failing) handler(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		for k, v := range f.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write(errorBody(kind, "try again"))
	}
}

// answered is the default transport, telling got of each answer it received.
type answered struct{ got chan<- struct{} }

func (a answered) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		a.got <- struct{}{}
	}
	return resp, err
}

// "Timeout bounds one request, its retries and the waits between them included": a
// provider answering 503 with a wait of 2 s is not retried five times under a
// 3 s timeout; the request ends with the last answer once the next wait would pass
// the deadline.
func TestTimeoutCoversRetries(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := &failing{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After-Ms": "2000"}}
			p := newProvider(t, v, apiServer(t, v.kind, "", f.handler(v.kind)), agent.ProviderConfig{MaxRetries: 5, Timeout: 3 * time.Second})
			_, err := agent.Run(context.Background(), config(w, p), "hi")
			if !errors.Is(err, agent.ErrProviderUnavailable) {
				t.Fatalf("err %v, want provider_unavailable", err)
			}
			n := f.requests.Load()
			if n > 2 {
				t.Errorf("%d attempts within a 3 s timeout with 2 s between them", n)
			}
			if fl, ok := agent.FailureOf(err); !ok || fl.Attempts != int(n) || fl.Status != 503 {
				t.Errorf("failure %+v, want status 503 after the %d attempts the server saw", fl, n)
			}
		})
	}
}

// "Retry waits are the loop's own: bounded": a 429 asking for a wait of a day ends the
// retries at once with the typed rate-limit failure; the loop neither waits a day
// (the Anthropic SDK would) nor retries sooner than it was told (the OpenAI SDK would).
func TestRetryAfterBeyondTheBound(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := &failing{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "86400"}}
			p := newProvider(t, v, apiServer(t, v.kind, "", f.handler(v.kind)), agent.ProviderConfig{MaxRetries: 2})
			// A guard only: a loop that waited as told would end here as cancelled.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := agent.Run(ctx, config(w, p), "hi")
			if !errors.Is(err, agent.ErrProviderRateLimited) {
				t.Fatalf("err %v, want provider_rate_limited", err)
			}
			if n := f.requests.Load(); n != 1 {
				t.Errorf("%d attempts, want 1: the provider asked for a wait of a day", n)
			}
		})
	}
}

// "Retry waits are … ended by context cancellation": a run cancelled while it waits
// out a Retry-After of 50 s ends cancelled, without another attempt. (The guard is
// not a measure: the run ends on the cancel, and the SDK's uncancellable sleep would
// have held it for the whole 50 s.)
func TestRetryWaitEndsOnCancel(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := &failing{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "50"}}
			// The client says when the 429 has reached it: the wait starts then.
			got := make(chan struct{}, 4)
			client := &http.Client{Transport: answered{got: got}}
			p := newProvider(t, v, apiServer(t, v.kind, "", f.handler(v.kind)), agent.ProviderConfig{MaxRetries: 2, HTTPClient: client})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				rep *agent.Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := agent.Run(ctx, config(w, p), "hi")
				done <- result{rep, err}
			}()
			<-got
			cancel()
			select {
			case r := <-done:
				if !errors.Is(r.err, agent.ErrCanceled) || r.rep.Reason != agent.ReasonCancelled {
					t.Fatalf("report %+v, err %v; want cancelled", r.rep, r.err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the run still waits out Retry-After after its context was cancelled")
			}
			if n := f.requests.Load(); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

// "An answer's size is bounded (MaxResponseBytes), exceeding it is a typed error":
// an answer or an error body over the bound is provider_bad_response, and nothing of
// the answer is dispatched.
func TestResponseSizeBound(t *testing.T) {
	big := strings.Repeat("x", 10<<10)
	for _, v := range variants {
		t.Run(v.String()+"/answer", func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			step := echoStep("c1", 1, 10, 10)
			step.Text = big
			s := &scripted{steps: []scriptStep{step}}
			p := newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{MaxResponseBytes: 4 << 10})
			_, err := agent.Run(context.Background(), config(w, p), "hi")
			if !errors.Is(err, agent.ErrProviderBadResponse) || !strings.Contains(err.Error(), "MaxResponseBytes") {
				t.Fatalf("err %v, want provider_bad_response naming MaxResponseBytes", err)
			}
			if n := len(w.events(t, agent.EventDispatch)); n != 0 {
				t.Errorf("%d calls of an answer over the bound were dispatched", n)
			}
			failed := w.events(t, agent.EventFailed)
			if len(failed) != 1 || !strings.Contains(string(failed[0].Data), `"code":"provider_bad_response"`) {
				t.Errorf("provider_failed events %v", failed)
			}
		})
		t.Run(v.String()+"/error-body", func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			base := apiServer(t, v.kind, "", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(errorBody(v.kind, big))
			})
			p := newProvider(t, v, base, agent.ProviderConfig{MaxResponseBytes: 4 << 10})
			_, err := agent.Run(context.Background(), config(w, p), "hi")
			if !errors.Is(err, agent.ErrProviderBadResponse) || !strings.Contains(err.Error(), "MaxResponseBytes") {
				t.Fatalf("err %v, want provider_bad_response naming MaxResponseBytes", err)
			}
		})
	}
}

// "Redirects from the provider are not followed (typed error)": the request, and the
// key with it, goes to the base URL only.
func TestRedirectNotFollowed(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			target := &scripted{steps: []scriptStep{{Text: "redirected"}}}
			to := apiServer(t, v.kind, "", target.handler(v.kind))
			base := apiServer(t, v.kind, "", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, strings.TrimSuffix(to, "/v1")+r.URL.Path, http.StatusTemporaryRedirect)
			})
			// The redirect is refused even with a client of the embedder's own.
			p := newProvider(t, v, base, agent.ProviderConfig{HTTPClient: &http.Client{}})
			rep, err := agent.Run(context.Background(), config(w, p), "hi")
			if !errors.Is(err, agent.ErrProviderBadResponse) || !strings.Contains(err.Error(), "redirect") {
				t.Fatalf("report %+v, err %v; want provider_bad_response for the redirect", rep, err)
			}
			if fl, ok := agent.FailureOf(err); !ok || fl.Status != http.StatusTemporaryRedirect {
				t.Errorf("failure %+v, want status 307", fl)
			}
			if n := target.requests.Load(); n != 0 {
				t.Errorf("the redirect was followed: its target got %d requests", n)
			}
		})
	}
}

// cutStream writes the first part of step's stream, up to and with the first half of
// its first tool call's arguments, and ends the connection there.
func cutStream(w http.ResponseWriter, kind string, step scriptStep) {
	rec := httptest.NewRecorder()
	if kind == "openai" {
		writeOpenAI(rec, step)
	} else {
		writeAnthropic(rec, step)
	}
	full := rec.Body.String()
	marker := `"arguments":"{\"n`
	if kind == "anthropic" {
		marker = `"partial_json":"{\"n`
	}
	i := strings.Index(full, marker)
	if i < 0 {
		panic("cutStream: no tool call in the stream")
	}
	end := i + strings.Index(full[i:], "\n\n") + 2
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = w.Write([]byte(full[:end]))
}

// "A cut OpenAI stream dispatched a partial tool call … Both are
// provider_bad_response": a stream that ends in the middle of a tool call, without
// its finish, is an unusable answer and none of its calls reaches the kernel.
func TestCutStreamDispatchesNothing(t *testing.T) {
	for _, v := range variants {
		if !v.stream {
			continue
		}
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			step := echoStep("c1", 1, 10, 10)
			step.Calls = append(step.Calls, scriptCall{ID: "c2", Name: "echo", Arguments: `{"n":2}`})
			base := apiServer(t, v.kind, "", func(w http.ResponseWriter, r *http.Request) { cutStream(w, v.kind, step) })
			_, err := agent.Run(context.Background(), config(w, newProvider(t, v, base, agent.ProviderConfig{})), "hi")
			if !errors.Is(err, agent.ErrProviderBadResponse) {
				t.Fatalf("err %v, want provider_bad_response", err)
			}
			if n := len(w.events(t, agent.EventDispatch)); n != 0 {
				t.Errorf("%d calls of a cut stream were dispatched", n)
			}
			if n := len(w.events(t, engine.EventToolCalled)); n != 0 {
				t.Errorf("%d calls of a cut stream reached the kernel", n)
			}
		})
	}
}

// "An unparseable 2xx was reported as unreachable": an answer with a success status
// that cannot be read is provider_bad_response, with its status.
func TestUnreadableAnswerIsBadResponse(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			base := apiServer(t, v.kind, "", func(w http.ResponseWriter, r *http.Request) {
				if v.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte("event: message_start\ndata: {\"choices\": [\n\n"))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"choices": [`))
			})
			_, err := agent.Run(context.Background(), config(w, newProvider(t, v, base, agent.ProviderConfig{})), "hi")
			if !errors.Is(err, agent.ErrProviderBadResponse) {
				t.Fatalf("err %v, want provider_bad_response", err)
			}
			if fl, ok := agent.FailureOf(err); !ok || fl.Status != http.StatusOK {
				t.Errorf("failure %+v, want status 200", fl)
			}
		})
	}
}

// "Duplicate or missing call ids: … key calls by their position in the answer": a
// run killed after the first of two calls with the same ID (or none) settled gives
// the second its own dispatch on resume, not the first one's result.
func TestResumeWithRepeatedCallIDs(t *testing.T) {
	for _, id := range []string{"dup", ""} {
		for _, v := range variants {
			t.Run(v.String()+"/id="+id, func(t *testing.T) {
				dir := t.TempDir()
				w := openWorld(t, dir, engine.Direct)
				step := echoStep(id, 1, 10, 10)
				step.Calls = append(step.Calls, scriptCall{ID: id, Name: "echo", Arguments: `{"n":2}`})
				s := &scripted{steps: []scriptStep{step}}
				cfg := config(w, newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{}))
				// Killed as the second call is about to be dispatched.
				dispatches := 0
				cfg.Log = &crashLog{Log: cfg.Log, crashAt: func(typ string, _ json.RawMessage) bool {
					if typ == agent.EventDispatch {
						dispatches++
					}
					return dispatches == 2
				}}
				if _, err := agent.Run(context.Background(), cfg, "two calls"); err == nil {
					t.Fatal("the killed run reported no error")
				}
				w.close()
				w = openWorld(t, dir, engine.Direct)
				s2 := &scripted{steps: []scriptStep{{Text: "resumed"}}}
				cfg = config(w, newProvider(t, v, apiServer(t, v.kind, "", s2.handler(v.kind)), agent.ProviderConfig{}))
				ck := &countingKernel{Kernel: cfg.Kernel}
				cfg.Kernel = ck
				var outs []agent.Outcome
				cfg.Observer.ToolDone = func(_ int, o agent.Outcome) { outs = append(outs, o) }
				if _, err := agent.Resume(context.Background(), cfg, ""); err != nil {
					t.Fatal(err)
				}
				// The first call settled before the kill; the second, never
				// dispatched, is dispatched now and answered with its own result.
				if ck.frames.Load() != 1 || len(outs) != 1 || outs[0].Text != `{"n":2}` {
					t.Fatalf("%d frames dispatched on resume, outcomes %+v; want the second call's {\"n\":2}", ck.frames.Load(), outs)
				}
				// The model reads both results, in call order.
				body := s2.last.Load().(string)
				if i, j := strings.Index(body, `{\"n\":1}`), strings.Index(body, `{\"n\":2}`); i < 0 || j < i {
					t.Errorf("the resumed request does not answer n=1 then n=2: %s", body)
				}
			})
		}
	}
}

// "Unrecordable answers: an answer the log refuses (e.g. a repeated key in an
// Anthropic input) … Record it as text and go on (the tool call gets a typed protocol
// error)": the run is not killed by a storage error, the call is refused by the
// kernel's adapter as protocol_frame, and the run can still be resumed from the log.
func TestUnrecordableAnswerIsRecordedAsText(t *testing.T) {
	for _, v := range variants {
		if v.kind != "anthropic" {
			continue
		}
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			step := echoStep("c1", 1, 10, 10)
			step.Calls[0].Arguments = `{"n":1,"n":2}`
			s := &scripted{steps: []scriptStep{step, {Text: "done"}}}
			var outs []agent.Outcome
			cfg := config(w, newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{}))
			cfg.Observer.ToolDone = func(_ int, o agent.Outcome) { outs = append(outs, o) }
			rep, err := agent.Run(context.Background(), cfg, "hi")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reason != agent.ReasonDone || rep.Final != "done" {
				t.Fatalf("report %+v", rep)
			}
			if len(outs) != 1 || outs[0].Code != string(engine.CodeProtocolFrame) {
				t.Fatalf("outcomes %+v, want one protocol_frame", outs)
			}
			resp := w.events(t, agent.EventResponse)
			if len(resp) != 2 || !strings.Contains(string(resp[0].Data), `"tool_calls_text"`) {
				t.Fatalf("agent_response events %v, want the first with its calls as text", resp)
			}
			if err := w.sys.VerifyLog(w.pid); err != nil {
				t.Fatal(err)
			}

			// Killed before the call was dispatched, the run resumes from the text.
			dir := t.TempDir()
			w = openWorld(t, dir, engine.Direct)
			s = &scripted{steps: []scriptStep{step}}
			cfg = config(w, newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{}))
			cfg.Log = &crashLog{Log: cfg.Log, crashAt: func(typ string, _ json.RawMessage) bool { return typ == agent.EventDispatch }}
			if _, err := agent.Run(context.Background(), cfg, "hi"); err == nil {
				t.Fatal("the killed run reported no error")
			}
			w.close()
			w = openWorld(t, dir, engine.Direct)
			s = &scripted{steps: []scriptStep{{Text: "done"}}}
			outs = nil
			cfg = config(w, newProvider(t, v, apiServer(t, v.kind, "", s.handler(v.kind)), agent.ProviderConfig{}))
			cfg.Observer.ToolDone = func(_ int, o agent.Outcome) { outs = append(outs, o) }
			rep, err = agent.Resume(context.Background(), cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Final != "done" || len(outs) != 1 || outs[0].Code != string(engine.CodeProtocolFrame) {
				t.Fatalf("resumed: report %+v, outcomes %+v; want the call refused as protocol_frame, then done", rep, outs)
			}
		})
	}
}
