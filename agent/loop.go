package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/internal/randid"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Kernel is what the loop needs of the kernel (*engine.Kernel has it).
type Kernel interface {
	HandleFrame(ctx context.Context, pid string, frame []byte) (*engine.Result, error)
	Tools(pid string) ([]render.Tool, error)
	Instructions(pid string) (string, error)
}

// Log is the process's durable event log (*store.Store has it). Append is synced: an
// event it returned is durable.
type Log interface {
	Append(ctx context.Context, pid, typ string, data json.RawMessage) (store.Event, error)
	Events(pid string, after uint64, limit int) ([]store.Event, error)
}

// Event types of the provider path, in the process's log.
const (
	EventStarted    = "agent_started"     // a run began: provider, model, limits
	EventMessage    = "agent_message"     // a user or tool-result message of the conversation
	EventRequest    = "agent_request"     // a model request is about to be sent
	EventResponse   = "agent_response"    // the model's answer, with usage
	EventDispatch   = "agent_dispatch"    // a tool call is about to reach the kernel
	EventToolResult = "agent_tool_result" // what the call came to
	EventFailed     = "provider_failed"   // a typed provider failure
	EventFinished   = "agent_finished"    // the run ended, and why
)

// Reasons a run ends (Report.Reason, agent_finished's reason).
const (
	ReasonDone      = "done"          // the model answered without a tool call
	ReasonMaxSteps  = "max_steps"     // the step bound was reached
	ReasonBudget    = "budget_tokens" // the token budget is used up
	ReasonFailed    = "provider_failed"
	ReasonCancelled = "cancelled"
)

// Observer sees the loop as it runs (a terminal UI); every method is optional.
type Observer struct {
	// Text receives the model's text as it streams in.
	Text func(delta string)
	// ToolCall is called before a call is dispatched.
	ToolCall func(step int, call ToolCall)
	// ToolDone is called with each call's outcome.
	ToolDone func(step int, out Outcome)
	// Step is called after each model answer with the usage so far.
	Step func(step int, usage, total Usage)
}

// Config configures a run.
type Config struct {
	Kernel   Kernel
	Log      Log
	Provider Provider
	Model    string
	PID      string
	// MaxSteps bounds the model requests of one run; 0 means 32.
	MaxSteps int
	// BudgetTokens stops the run cleanly once its total usage reaches it; 0: no bound.
	BudgetTokens int64
	// MaxRecordBytes bounds each message stored in the log; a larger one keeps its
	// sha256 and size only (and the run can then not be resumed). 0 means 32 KiB.
	MaxRecordBytes int
	Observer       Observer
}

// Report is how a run ended.
type Report struct {
	RunID  string `json:"run_id"`
	Steps  int    `json:"steps"`
	Usage  Usage  `json:"usage"`
	Reason string `json:"reason"`
	// Final is the model's last text.
	Final string `json:"final,omitempty"`
	// Calls counts the tool calls dispatched (refused frames included).
	Calls int `json:"calls"`
}

func (c *Config) check() error {
	switch {
	case c.Kernel == nil || c.Log == nil || c.Provider == nil:
		return errorf(CodeInvalidConfig, nil, "a run needs a kernel, a log and a provider")
	case c.PID == "":
		return errorf(CodeInvalidConfig, nil, "a run needs a process (PID)")
	case c.Model == "":
		return errorf(CodeInvalidConfig, nil, "a run needs a model name")
	case c.MaxSteps < 0 || c.BudgetTokens < 0 || c.MaxRecordBytes < 0:
		return errorf(CodeInvalidConfig, nil, "limits must not be negative")
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = 32
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 32 << 10
	}
	return nil
}

// run is one conversation's state.
type run struct {
	cfg      Config
	id       string
	messages []json.RawMessage
	step     int
	usage    Usage
	calls    int
	final    string
	// pending are the tool calls of the last answer not yet answered, with what is
	// already known of them (resume). A call is known by its position in the answer:
	// its provider ID may be missing or repeated.
	pending  []ToolCall
	known    map[int]Outcome // by position in the answer
	inflight map[int]bool    // dispatched, outcome not recorded: settlement unknown
}

// Run starts a new run on cfg.PID with prompt as the user's first message.
func Run(ctx context.Context, cfg Config, prompt string) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, id: newRunID(), known: map[int]Outcome{}, inflight: map[int]bool{}}
	if err := r.append(ctx, EventStarted, map[string]any{"run_id": r.id, "provider": cfg.Provider.Name(), "model": cfg.Model,
		"max_steps": cfg.MaxSteps, "budget_tokens": cfg.BudgetTokens}); err != nil {
		return nil, err
	}
	m, err := cfg.Provider.UserMessage(prompt)
	if err != nil {
		return nil, err
	}
	if err := r.addMessage(ctx, "user", m); err != nil {
		return nil, err
	}
	return r.loop(ctx)
}

// Resume carries on run runID of cfg.PID from its last settled step ("" resumes the
// process's latest unfinished run). Model requests that got no recorded answer are
// sent again; a tool call whose dispatch was recorded without an outcome is not: the
// model is told that its settlement is unknown.
func Resume(ctx context.Context, cfg Config, runID string) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	r, err := load(cfg, runID)
	if err != nil {
		return nil, err
	}
	return r.loop(ctx)
}

func newRunID() string { return randid.New("run_") }

func (r *run) report(reason string) *Report {
	return &Report{RunID: r.id, Steps: r.step, Usage: r.usage, Reason: reason, Final: r.final, Calls: r.calls}
}

func (r *run) loop(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	for {
		if len(r.pending) > 0 {
			if err := r.answerCalls(ctx); err != nil {
				return r.finish(ctx, err)
			}
		}
		if cfg.BudgetTokens > 0 && r.usage.Total() >= cfg.BudgetTokens {
			return r.finish(ctx, nil, ReasonBudget)
		}
		if r.step >= cfg.MaxSteps {
			return r.finish(ctx, nil, ReasonMaxSteps)
		}
		if err := ctx.Err(); err != nil {
			return r.finish(ctx, errorf(CodeCanceled, err, "%s", "the run was cancelled"))
		}
		turn, err := r.request(ctx)
		if err != nil {
			return r.finish(ctx, err)
		}
		if len(turn.Calls) == 0 {
			return r.finish(ctx, nil, ReasonDone)
		}
		r.pending = turn.Calls
	}
}

// request sends one model request with the process's current projection and records
// the request and its answer.
func (r *run) request(ctx context.Context) (*Turn, error) {
	cfg := r.cfg
	defs, err := cfg.Kernel.Tools(cfg.PID)
	if err != nil {
		return nil, err
	}
	tools, err := render.Tools(defs, cfg.Provider.Rendering())
	if err != nil {
		return nil, err
	}
	system, err := cfg.Kernel.Instructions(cfg.PID)
	if err != nil {
		return nil, err
	}
	r.step++
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	if err := r.append(ctx, EventRequest, map[string]any{"run_id": r.id, "step": r.step, "messages": len(r.messages),
		"tools": names, "tools_sha256": digest(tools), "system_sha256": digest([]byte(system))}); err != nil {
		return nil, err
	}
	turn, err := cfg.Provider.Send(ctx, Request{Model: cfg.Model, System: system, Messages: r.messages, Tools: tools}, cfg.Observer.Text)
	if turn != nil {
		r.usage = r.usage.add(turn.Usage)
	}
	if err != nil {
		pe, ok := liberr.As(err)
		if !ok || pe.Code == "" {
			pe = errorf(CodeProviderBadResponse, err, "%s", liberr.Clip(err.Error(), 300))
		}
		data := map[string]any{"run_id": r.id, "step": r.step, "code": pe.Code, "message": pe.Message}
		if f, ok := FailureOf(pe); ok {
			data["attempts"] = f.Attempts
			if f.Status != 0 {
				data["status"] = f.Status
			}
		}
		if turn != nil {
			data["usage"] = turn.Usage
		}
		if aerr := r.append(context.WithoutCancel(ctx), EventFailed, data); aerr != nil {
			return nil, aerr
		}
		return nil, pe
	}
	// The frames are kept as sent: a resumed run dispatches exactly these.
	data := map[string]any{"run_id": r.id, "step": r.step, "usage": turn.Usage, "stop": turn.Stop,
		"attempts": turn.Attempts, "text_bytes": len(turn.Text)}
	calls, err := json.Marshal(turn.Calls)
	if err != nil {
		return nil, err
	}
	r.bounded(data, "message", turn.Message)
	r.bounded(data, "tool_calls", calls)
	if err := r.append(ctx, EventResponse, data); err != nil {
		if !errors.Is(err, store.ErrInvalid) {
			return nil, err
		}
		// The log refuses the answer as JSON (a key repeated in an Anthropic input,
		// nesting past its depth): it keeps it as text, which a resumed run reads
		// back, and the run goes on. Such a call's frame is refused, typed, by the
		// kernel's adapter.
		delete(data, "message")
		delete(data, "tool_calls")
		r.bounded(data, "message_text", turn.Message)
		r.bounded(data, "tool_calls_text", calls)
		if err := r.append(ctx, EventResponse, data); err != nil {
			return nil, err
		}
	}
	r.messages = append(r.messages, turn.Message)
	r.final = turn.Text
	if cfg.Observer.Step != nil {
		cfg.Observer.Step(r.step, turn.Usage, r.usage)
	}
	return turn, nil
}

// answerCalls dispatches the pending tool calls in order, each recorded before and
// after, then adds the provider's tool-result messages to the conversation.
func (r *run) answerCalls(ctx context.Context) error {
	cfg := r.cfg
	outs := make([]Outcome, 0, len(r.pending))
	for i, c := range r.pending {
		if out, ok := r.known[i]; ok {
			outs = append(outs, out)
			continue
		}
		if r.inflight[i] {
			// Dispatched before a stop, never recorded as settled: it may have run.
			out := Outcome{Call: c, Code: string(codeUnknownSettlement),
				Text: "unknown_settlement: this call was dispatched before the host stopped and its outcome is unknown; it was not sent again. Verify its effects with an authoritative read before deciding to repeat it."}
			outs = append(outs, out)
			if err := r.recordOutcome(ctx, i, out); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return errorf(CodeCanceled, err, "%s", "the run was cancelled")
		}
		if cfg.Observer.ToolCall != nil {
			cfg.Observer.ToolCall(r.step, c)
		}
		if err := r.append(ctx, EventDispatch, map[string]any{"run_id": r.id, "step": r.step, "index": i, "tool_call_id": c.ID, "name": liberr.Clip(c.Name, 256)}); err != nil {
			return err
		}
		r.calls++
		res, err := cfg.Kernel.HandleFrame(ctx, cfg.PID, c.Frame)
		out := Outcome{Call: c}
		switch {
		case err == nil:
			out.CallID, out.Text = res.CallID, res.Text
		default:
			code := string(liberr.CodeOf(err))
			if fatal(code) {
				return err
			}
			if code == "" {
				code = string(engine.CodeToolFailed)
			}
			out.Code, out.Text = code, code+": "+err.Error()
			if ee, ok := liberr.As(err); ok {
				out.Text = string(ee.Code) + ": " + ee.Message
			}
		}
		if cfg.Observer.ToolDone != nil {
			cfg.Observer.ToolDone(r.step, out)
		}
		// The outcome is recorded even when the context ended meanwhile: the call
		// settled and the record must say so.
		if err := r.recordOutcome(context.WithoutCancel(ctx), i, out); err != nil {
			return err
		}
		outs = append(outs, out)
	}
	msgs, err := cfg.Provider.ToolResults(outs)
	if err != nil {
		return err
	}
	// The results settled: they join the conversation even when the context ended
	// meanwhile, so that a resumed run sees them and the loop ends as cancelled.
	for _, m := range msgs {
		if err := r.addMessage(context.WithoutCancel(ctx), "tool", m); err != nil {
			return err
		}
	}
	r.pending, r.known, r.inflight = nil, map[int]Outcome{}, map[int]bool{}
	return nil
}

// fatal codes stop the loop instead of being told to the model: the kernel cannot
// take calls at all.
func fatal(code string) bool {
	switch engine.Code(code) {
	case engine.CodeClosed, engine.CodeStorage, engine.CodeUnknownProcess:
		return true
	}
	return false
}

// recordOutcome records what the call at position i of the answer came to.
func (r *run) recordOutcome(ctx context.Context, i int, out Outcome) error {
	data := map[string]any{"run_id": r.id, "step": r.step, "index": i, "tool_call_id": out.Call.ID, "ok": out.Code == ""}
	if out.CallID != "" {
		data["kernel_call_id"] = out.CallID
	}
	if out.Code != "" {
		data["code"] = out.Code
	}
	r.bounded(data, "text", []byte(out.Text))
	return r.append(ctx, EventToolResult, data)
}

func (r *run) addMessage(ctx context.Context, role string, m json.RawMessage) error {
	data := map[string]any{"run_id": r.id, "step": r.step, "role": role}
	r.bounded(data, "message", m)
	if err := r.append(ctx, EventMessage, data); err != nil {
		return err
	}
	r.messages = append(r.messages, m)
	return nil
}

// bounded puts v under key when it fits the record bound, else its digest and size.
// A message is stored as JSON; a text, and JSON kept as text (a key ending in _text),
// as a string.
func (r *run) bounded(data map[string]any, key string, v []byte) {
	if len(v) > r.cfg.MaxRecordBytes {
		data[key+"_sha256"] = digest(v)
		data[key+"_bytes"] = len(v)
		data[key+"_truncated"] = true
		return
	}
	if key == "text" || strings.HasSuffix(key, "_text") {
		data[key] = string(v)
	} else {
		data[key] = json.RawMessage(v)
	}
}

func (r *run) finish(ctx context.Context, err error, reason ...string) (*Report, error) {
	why := ""
	if len(reason) > 0 {
		why = reason[0]
	}
	if err != nil {
		switch liberr.CodeOf(err) {
		case CodeCanceled:
			why = ReasonCancelled
		case CodeStorage, engine.CodeClosed:
			// The log refuses writes: the run cannot record its end either.
			return r.report(ReasonFailed), err
		default:
			why = ReasonFailed
		}
	}
	data := map[string]any{"run_id": r.id, "reason": why, "steps": r.step, "usage": r.usage, "calls": r.calls}
	if err != nil {
		data["code"] = string(liberr.CodeOf(err))
	}
	if aerr := r.append(context.WithoutCancel(ctx), EventFinished, data); aerr != nil && err == nil {
		err = aerr
	}
	return r.report(why), err
}

func (r *run) append(ctx context.Context, typ string, data map[string]any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return errorf(CodeStorage, err, "encode %s", typ)
	}
	if _, err := r.cfg.Log.Append(ctx, r.cfg.PID, typ, b); err != nil {
		return errorf(CodeStorage, err, "record %s: %v", typ, err)
	}
	return nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// load rebuilds run runID (or the latest unfinished one) from the process's log.
func load(cfg Config, runID string) (*run, error) {
	var evs []store.Event
	var after uint64
	for {
		page, err := cfg.Log.Events(cfg.PID, after, 0)
		if err != nil {
			return nil, errorf(CodeStorage, err, "read the log of %s: %v", cfg.PID, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if len(e.Type) > 6 && (e.Type[:6] == "agent_" || e.Type == EventFailed) {
				evs = append(evs, e)
			}
		}
		after = page[len(page)-1].Seq
	}
	type field struct {
		RunID      string          `json:"run_id"`
		Step       int             `json:"step"`
		Provider   string          `json:"provider"`
		Model      string          `json:"model"`
		Message    json.RawMessage `json:"message"`
		MsgText    *string         `json:"message_text"`
		Truncated  bool            `json:"message_truncated"`
		MsgTrunc   bool            `json:"message_text_truncated"`
		Usage      Usage           `json:"usage"`
		Calls      []ToolCall      `json:"tool_calls"`
		CallsText  *string         `json:"tool_calls_text"`
		CallsTrunc bool            `json:"tool_calls_truncated"`
		CallsTextT bool            `json:"tool_calls_text_truncated"`
		CallID     string          `json:"tool_call_id"`
		Index      *int            `json:"index"`
		Kernel     string          `json:"kernel_call_id"`
		Code       string          `json:"code"`
		Text       string          `json:"text"`
		TextTrunc  bool            `json:"text_truncated"`
	}
	if runID == "" {
		finished := map[string]bool{}
		for _, e := range evs {
			var f field
			_ = json.Unmarshal(e.Data, &f)
			switch e.Type {
			case EventStarted:
				runID = f.RunID
			case EventFinished:
				finished[f.RunID] = true
			}
		}
		if runID == "" || finished[runID] {
			return nil, errorf(CodeNotResumable, nil, "%s", "process "+cfg.PID+" has no unfinished run")
		}
	}
	r := &run{cfg: cfg, id: runID, known: map[int]Outcome{}, inflight: map[int]bool{}}
	started := false
	var lastCalls []ToolCall
	for _, e := range evs {
		var f field
		if err := json.Unmarshal(e.Data, &f); err != nil || f.RunID != runID {
			continue
		}
		switch e.Type {
		case EventStarted:
			started = true
			if f.Provider != cfg.Provider.Name() {
				return nil, errorf(CodeNotResumable, nil, "%s", fmt.Sprintf("run %s talks to %s, not %s", runID, f.Provider, cfg.Provider.Name()))
			}
		case EventMessage:
			if f.Truncated {
				return nil, errorf(CodeNotResumable, nil, "%s", fmt.Sprintf("run %s stored a message of step %d as a digest only", runID, f.Step))
			}
			r.messages = append(r.messages, f.Message)
			lastCalls = nil
		case EventRequest:
			r.step = f.Step
		case EventResponse:
			if f.Truncated || f.CallsTrunc || f.MsgTrunc || f.CallsTextT {
				return nil, errorf(CodeNotResumable, nil, "%s", fmt.Sprintf("run %s stored the answer of step %d as a digest only", runID, f.Step))
			}
			// An answer the log refused as JSON is kept as text.
			if f.MsgText != nil {
				f.Message = json.RawMessage(*f.MsgText)
			}
			if f.CallsText != nil {
				if err := json.Unmarshal([]byte(*f.CallsText), &f.Calls); err != nil {
					return nil, errorf(CodeNotResumable, err, "%s", fmt.Sprintf("run %s stored the tool calls of step %d as a text that does not read back", runID, f.Step))
				}
			}
			r.step = f.Step
			r.usage = r.usage.add(f.Usage)
			r.messages = append(r.messages, f.Message)
			lastCalls = f.Calls
			r.known, r.inflight = map[int]Outcome{}, map[int]bool{}
		case EventFailed:
			r.usage = r.usage.add(f.Usage)
		case EventDispatch:
			r.inflight[r.position(lastCalls, f.Index, f.CallID, false)] = true
			r.calls++
		case EventToolResult:
			i := r.position(lastCalls, f.Index, f.CallID, true)
			delete(r.inflight, i)
			if f.TextTrunc {
				return nil, errorf(CodeNotResumable, nil, "%s", fmt.Sprintf("run %s stored a tool outcome of step %d as a digest only", runID, f.Step))
			}
			r.known[i] = Outcome{CallID: f.Kernel, Code: f.Code, Text: f.Text}
		case EventFinished:
			return nil, errorf(CodeNotResumable, nil, "%s", "run "+runID+" has finished")
		}
	}
	if !started {
		return nil, errorf(CodeNotResumable, nil, "%s", "no run "+runID+" in process "+cfg.PID)
	}
	// The last answer's calls that the conversation has not answered yet.
	r.pending = lastCalls
	for i, c := range lastCalls {
		if len(c.Frame) == 0 {
			return nil, errorf(CodeNotResumable, nil, "%s", fmt.Sprintf("run %s stored a tool call of step %d without its frame", runID, r.step))
		}
		if out, ok := r.known[i]; ok {
			out.Call = c
			r.known[i] = out
		}
	}
	return r, nil
}

// position is the place in the answer's calls of the call a dispatch or outcome
// event names: its index, or, in an event written without one, the first call with
// its provider ID that is not settled yet (dispatched, for an outcome).
func (r *run) position(calls []ToolCall, index *int, id string, settling bool) int {
	if index != nil {
		return *index
	}
	for i, c := range calls {
		if _, done := r.known[i]; c.ID == id && !done && r.inflight[i] == settling {
			return i
		}
	}
	return -1
}
