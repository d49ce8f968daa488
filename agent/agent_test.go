package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/agent"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// world is a real System (store, sandbox, JIT tools, kernel) with one process of the
// default image.
type world struct {
	sys *libos.System
	pid string
}

var cacheDir string

func openWorld(t *testing.T, dir string, proj engine.Projection) *world {
	t.Helper()
	ctx := context.Background()
	if cacheDir == "" {
		cacheDir = filepath.Join(os.TempDir(), "libos-agent-test-cache")
	}
	sys, err := libos.Open(ctx, dir, libos.Options{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{sys: sys}
	t.Cleanup(func() { w.close() })
	procs, _ := sys.ListProcesses()
	if len(procs) > 0 {
		w.pid = procs[0].PID
		return w
	}
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	img.Projection = proj
	if w.pid, err = sys.SpawnImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) close() {
	if w.sys != nil {
		w.sys.Close()
		w.sys = nil
	}
}

func (w *world) events(t *testing.T, typ string) []store.Event {
	t.Helper()
	var out []store.Event
	var after uint64
	for {
		evs, err := w.sys.Events(w.pid, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, e := range evs {
			if typ == "" || e.Type == typ {
				out = append(out, e)
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

func config(w *world, p agent.Provider) agent.Config {
	return w.sys.AgentConfig(agent.Config{Provider: p, Model: "scripted-model", PID: w.pid, MaxSteps: 10})
}

type variant struct {
	kind   string
	stream bool
}

var variants = []variant{{"openai", false}, {"openai", true}, {"anthropic", false}, {"anthropic", true}}

func (v variant) String() string {
	if v.stream {
		return v.kind + "/stream"
	}
	return v.kind
}

func provider(t *testing.T, v variant, f *fakeProvider, retries int) agent.Provider {
	t.Helper()
	p, err := agent.NewProvider(agent.ProviderConfig{Kind: v.kind, BaseURL: f.url(), APIKey: "sk-test-secret-key-0123456789", Stream: v.stream, MaxRetries: retries})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The JIT authoring Skill: "In direct mode the next model request can expose the JIT as
// its own native schema and it is called by name. In multiplexed mode only the generic
// run_jit_tool schema is exposed". A real session through each provider's wire format:
// propose, validate, register, then call the new tool.
func TestJITSessionThroughProvider(t *testing.T) {
	for _, proj := range []engine.Projection{engine.Direct, engine.Multiplexed} {
		for _, v := range variants {
			t.Run(string(proj)+"/"+v.String(), func(t *testing.T) {
				w := openWorld(t, t.TempDir(), proj)
				f := newFakeProvider(t, v.kind, "jit-session-"+string(proj))
				var streamed strings.Builder
				cfg := config(w, provider(t, v, f, 0))
				cfg.Observer.Text = func(s string) { streamed.WriteString(s) }
				rep, err := agent.Run(context.Background(), cfg, "Write a tool that adds two numbers, then add 20 and 22.")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Reason != agent.ReasonDone || rep.Steps != 5 || rep.Final != "The sum is 42." || rep.Calls != 4 {
					t.Fatalf("report %+v", rep)
				}
				if rep.Usage != (agent.Usage{Input: 500, Output: 100}) {
					t.Errorf("usage %+v, want 500 in / 100 out", rep.Usage)
				}
				if !strings.Contains(streamed.String(), "The sum is 42.") {
					t.Errorf("observer text %q", streamed.String())
				}
				// The tool appears in the very next request in direct mode, never in
				// multiplexed mode.
				for i, req := range f.requests {
					names := toolNames(v.kind, req)
					has := slices.Contains(names, "sum_numbers")
					want := proj == engine.Direct && i >= 3
					if has != want {
						t.Errorf("request %d offers %v: sum_numbers present=%v, want %v", i+1, names, has, want)
					}
					if slices.Contains(names, "run_jit_tool") != (proj == engine.Multiplexed) {
						t.Errorf("request %d offers %v in %s mode", i+1, names, proj)
					}
					if strings.Contains(fmt.Sprint(req), "sk-test-secret") {
						t.Errorf("request %d carries the API key in its body", i+1)
					}
				}
				// The JIT call went through the kernel and returned the sum.
				results := w.events(t, agent.EventToolResult)
				last := string(results[len(results)-1].Data)
				if !strings.Contains(last, `"ok":true`) || !strings.Contains(last, `{\"sum\":42}`) {
					t.Errorf("last tool outcome %s", last)
				}
				// The API key never reaches the log.
				for _, e := range w.events(t, "") {
					if strings.Contains(string(e.Data), "sk-test-secret") {
						t.Fatalf("event %s %s holds the API key", e.Type, e.Data)
					}
				}
				if err := w.sys.VerifyLog(w.pid); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// "Parallel tool calls in one response are dispatched and answered in order."
func TestParallelToolCallsInOrder(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "parallel-calls")
			var order []string
			cfg := config(w, provider(t, v, f, 0))
			cfg.Observer.ToolDone = func(step int, out agent.Outcome) { order = append(order, out.Call.ID+"="+out.Text) }
			if _, err := agent.Run(context.Background(), cfg, "echo three times"); err != nil {
				t.Fatal(err)
			}
			want := []string{`call_a={"n":1}`, `call_b={"n":9007199254740993}`, `call_c={"n":3}`}
			if !slices.Equal(order, want) {
				t.Fatalf("outcomes %v, want %v", order, want)
			}
			// The kernel saw the calls in the same order.
			var called []string
			for _, e := range w.events(t, engine.EventToolResult) {
				called = append(called, e.CallID)
			}
			if len(called) != 3 {
				t.Fatalf("%d tool_result events, want 3", len(called))
			}
			// The answers reach the model in call order.
			body := fmt.Sprint(f.requests[1])
			ia, ib, ic := strings.Index(body, "call_a"), strings.Index(body, "call_b"), strings.Index(body, "call_c")
			if ia < 0 || !(ia < ib && ib < ic) {
				t.Errorf("second request does not answer call_a, call_b, call_c in order: %s", body)
			}
		})
	}
}

// The protocol-diagnostics Skill: "malformed JSON, and non-object arguments fail in
// protocol normalization before Echo execution" — a provider-path frame the model got
// wrong is a protocol-frame failure, kept as repair evidence, and the loop goes on.
func TestMalformedFrameFromModel(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "malformed-frame")
			var outs []agent.Outcome
			cfg := config(w, provider(t, v, f, 0))
			cfg.Observer.ToolDone = func(step int, out agent.Outcome) { outs = append(outs, out) }
			rep, err := agent.Run(context.Background(), cfg, "echo")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reason != agent.ReasonDone || len(outs) != 2 {
				t.Fatalf("report %+v outcomes %+v", rep, outs)
			}
			if outs[0].Code != string(engine.CodeProtocolFrame) || outs[0].CallID != "" {
				t.Errorf("malformed frame outcome %+v, want protocol_frame before dispatch", outs[0])
			}
			if outs[1].Code != "" {
				t.Errorf("second call %+v", outs[1])
			}
			if n := len(w.events(t, "protocol_rejected")); n != 1 {
				t.Errorf("%d protocol_rejected events, want 1", n)
			}
			if n := len(w.events(t, engine.EventToolCalled)); n != 1 {
				t.Errorf("%d tool_called events, want 1 (the malformed frame is never dispatched)", n)
			}
			if !strings.Contains(fmt.Sprint(f.requests[1]), "protocol_frame") {
				t.Errorf("the model is not told its frame was refused: %v", f.requests[1])
			}
		})
	}
}

// Provider failures are typed and audited as provider events, never as tool failures:
// a 429 is retried within the bound, a 5xx past the bound ends the run typed.
func TestProviderFailures(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String()+"/429-then-success", func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "rate-limited-then-success")
			rep, err := agent.Run(context.Background(), config(w, provider(t, v, f, 2)), "hi")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Final != "hello" || f.attempts != 2 {
				t.Fatalf("report %+v after %d attempts", rep, f.attempts)
			}
			resp := w.events(t, agent.EventResponse)
			if len(resp) != 1 || !strings.Contains(string(resp[0].Data), `"attempts":2`) {
				t.Errorf("agent_response events %v, want one recording 2 attempts", resp)
			}
		})
		t.Run(v.String()+"/500-past-the-bound", func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "server-errors-past-the-bound")
			rep, err := agent.Run(context.Background(), config(w, provider(t, v, f, 2)), "hi")
			if !errors.Is(err, agent.ErrProviderUnavailable) {
				t.Fatalf("err %v, want provider_unavailable", err)
			}
			if f, ok := agent.FailureOf(err); !ok || f.Status != 503 || f.Attempts != 3 {
				t.Errorf("failure %+v, want status 503 after 3 attempts", f)
			}
			if rep.Reason != agent.ReasonFailed || f.attempts != 3 {
				t.Errorf("report %+v, %d attempts", rep, f.attempts)
			}
			failed := w.events(t, agent.EventFailed)
			if len(failed) != 1 || !strings.Contains(string(failed[0].Data), `"code":"provider_unavailable"`) {
				t.Errorf("provider_failed events %v", failed)
			}
			if n := len(w.events(t, engine.EventToolFailed)); n != 0 {
				t.Errorf("a provider failure wrote %d tool_failed events", n)
			}
			fin := w.events(t, agent.EventFinished)
			if len(fin) != 1 || !strings.Contains(string(fin[0].Data), `"reason":"provider_failed"`) {
				t.Errorf("agent_finished %v", fin)
			}
		})
		t.Run(v.String()+"/refusal", func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "refusal")
			_, err := agent.Run(context.Background(), config(w, provider(t, v, f, 0)), "hi")
			if !errors.Is(err, agent.ErrProviderRefused) {
				t.Fatalf("err %v, want provider_refused", err)
			}
		})
	}
}

// "--budget-tokens stops the loop cleanly."
func TestTokenBudget(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			w := openWorld(t, t.TempDir(), engine.Direct)
			f := newFakeProvider(t, v.kind, "token-budget")
			cfg := config(w, provider(t, v, f, 0))
			cfg.BudgetTokens = 150
			rep, err := agent.Run(context.Background(), cfg, "loop")
			if err != nil {
				t.Fatal(err)
			}
			// 80 tokens after step 1, 160 after step 2: no third request.
			if rep.Reason != agent.ReasonBudget || rep.Steps != 2 || rep.Usage.Total() != 160 || len(f.requests) != 2 {
				t.Fatalf("report %+v, %d requests", rep, len(f.requests))
			}
			// The calls of the last answer are still answered before stopping.
			if rep.Calls != 2 {
				t.Errorf("%d calls dispatched, want 2", rep.Calls)
			}
		})
	}
}

// crashLog is the store until a chosen append: that one and every later one fail, as
// if the host had been killed there.
type crashLog struct {
	agent.Log
	crashAt func(typ string, data json.RawMessage) bool
	crashed atomic.Bool
}

func (c *crashLog) Append(ctx context.Context, pid, typ string, data json.RawMessage) (store.Event, error) {
	if c.crashed.Load() || c.crashAt(typ, data) {
		c.crashed.Store(true)
		return store.Event{}, errors.New("host killed")
	}
	return c.Log.Append(ctx, pid, typ, data)
}

// countingKernel counts the frames that reach the kernel.
type countingKernel struct {
	agent.Kernel
	frames atomic.Int32
}

func (c *countingKernel) HandleFrame(ctx context.Context, pid string, frame []byte) (*engine.Result, error) {
	c.frames.Add(1)
	return c.Kernel.HandleFrame(ctx, pid, frame)
}

// "The conversation is durable: … the loop resumes after a restart from the last
// settled step, never re-sending a tool call whose settlement is unknown."
func TestResumeAfterKill(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String()+"/between-steps", func(t *testing.T) {
			dir := t.TempDir()
			w := openWorld(t, dir, engine.Direct)
			f := newFakeProvider(t, v.kind, "killed-between-steps")
			cfg := config(w, provider(t, v, f, 0))
			// Killed after the first step settled, before the second request.
			cfg.Log = &crashLog{Log: cfg.Log, crashAt: func(typ string, _ json.RawMessage) bool { return typ == agent.EventRequest && f.next == 1 }}
			if _, err := agent.Run(context.Background(), cfg, "two steps"); err == nil {
				t.Fatal("the killed run reported no error")
			}
			w.close()
			w = openWorld(t, dir, engine.Direct)
			f2 := newFakeProvider(t, v.kind, "resumed")
			cfg = config(w, provider(t, v, f2, 0))
			ck := &countingKernel{Kernel: cfg.Kernel}
			cfg.Kernel = ck
			rep, err := agent.Resume(context.Background(), cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Final != "resumed" || ck.frames.Load() != 0 || len(f2.requests) != 1 {
				t.Fatalf("report %+v, %d frames re-dispatched, %d requests", rep, ck.frames.Load(), len(f2.requests))
			}
			// The resumed request carries the whole conversation: the prompt, the
			// answer with its call and the call's result.
			body := fmt.Sprint(f2.requests[0])
			for _, want := range []string{"two steps", "c1", `{"n":1}`} {
				if !strings.Contains(body, want) {
					t.Errorf("resumed request lacks %q: %s", want, body)
				}
			}
		})
		t.Run(v.String()+"/unknown-settlement", func(t *testing.T) {
			dir := t.TempDir()
			w := openWorld(t, dir, engine.Direct)
			f := newFakeProvider(t, v.kind, "killed-mid-calls")
			cfg := config(w, provider(t, v, f, 0))
			// Killed after c1 was dispatched and ran, before its outcome was recorded.
			cfg.Log = &crashLog{Log: cfg.Log, crashAt: func(typ string, data json.RawMessage) bool {
				return typ == agent.EventToolResult && strings.Contains(string(data), `"c1"`)
			}}
			if _, err := agent.Run(context.Background(), cfg, "two calls"); err == nil {
				t.Fatal("the killed run reported no error")
			}
			w.close()
			w = openWorld(t, dir, engine.Direct)
			f2 := newFakeProvider(t, v.kind, "resumed-ok")
			var outs []agent.Outcome
			cfg = config(w, provider(t, v, f2, 0))
			ck := &countingKernel{Kernel: cfg.Kernel}
			cfg.Kernel = ck
			cfg.Observer.ToolDone = func(_ int, o agent.Outcome) { outs = append(outs, o) }
			if _, err := agent.Resume(context.Background(), cfg, ""); err != nil {
				t.Fatal(err)
			}
			// c1 is not sent again; c2, never dispatched, is.
			if ck.frames.Load() != 1 || len(outs) != 1 || outs[0].Call.ID != "c2" {
				t.Fatalf("%d frames dispatched on resume, outcomes %+v; want only c2", ck.frames.Load(), outs)
			}
			if n := len(w.events(t, engine.EventToolCalled)); n != 2 {
				t.Errorf("%d tool_called events, want 2 (c1 once, c2 once)", n)
			}
			if !strings.Contains(fmt.Sprint(f2.requests[0]), "unknown_settlement") {
				t.Errorf("the model is not told c1's settlement is unknown: %v", f2.requests[0])
			}
		})
	}
	t.Run("finished-run", func(t *testing.T) {
		w := openWorld(t, t.TempDir(), engine.Direct)
		f := newFakeProvider(t, "openai", "one-answer")
		cfg := config(w, provider(t, variant{kind: "openai"}, f, 0))
		rep, err := agent.Run(context.Background(), cfg, "hi")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.Resume(context.Background(), cfg, rep.RunID); !errors.Is(err, agent.ErrNotResumable) {
			t.Fatalf("resuming a finished run: %v, want agent_not_resumable", err)
		}
	})
}

// Bad configuration is a typed error and touches nothing.
func TestConfigErrors(t *testing.T) {
	if _, err := agent.NewProvider(agent.ProviderConfig{Kind: "gemini"}); liberr.CodeOf(err) != "invalid_config" {
		t.Errorf("unknown provider: %v", err)
	}
	if _, err := agent.NewProvider(agent.ProviderConfig{Kind: "openai", BaseURL: "ftp://x"}); liberr.CodeOf(err) != "invalid_config" {
		t.Errorf("bad base URL: %v", err)
	}
	if _, err := agent.Run(context.Background(), agent.Config{}, "x"); liberr.CodeOf(err) != "invalid_config" {
		t.Errorf("empty config: %v", err)
	}
}
