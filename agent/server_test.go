package agent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A scenario is a scripted model: the answers a provider gives, one per request, in a
// provider-neutral form that the fake server renders in each provider's documented
// wire format (chat completions, or the Messages API; streamed as server-sent events
// when the request asks for a stream).
type scenario struct {
	Steps []scriptStep `json:"steps"`
}

type scriptStep struct {
	// Status, when set, answers with that HTTP error instead (429, 500, …).
	Status int `json:"status,omitempty"`
	// Text is the assistant's text.
	Text string `json:"text,omitempty"`
	// Calls are the tool calls; Arguments is the OpenAI arguments string, and for
	// Anthropic the input value (it must then be JSON; a non-object is kept as is).
	Calls []scriptCall `json:"tool_calls,omitempty"`
	Usage struct {
		Input  int64 `json:"input"`
		Output int64 `json:"output"`
	} `json:"usage"`
	// WantTools, when set, must be exactly the tool names of this step's request.
	WantTools []string `json:"want_tools,omitempty"`
	// Refuse makes the model refuse.
	Refuse bool `json:"refuse,omitempty"`
}

type scriptCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// fakeProvider is a real HTTP server speaking one provider's wire format.
type fakeProvider struct {
	t        *testing.T
	kind     string
	script   []scriptStep
	srv      *httptest.Server
	mu       sync.Mutex
	next     int
	requests []map[string]any // every request body that reached the server, in order
	attempts int
}

var candidateRE = regexp.MustCompile(`tcand_[0-9a-f]{32}`)

func newFakeProvider(t *testing.T, kind string, sc scenario) *fakeProvider {
	f := &fakeProvider{t: t, kind: kind, script: sc.Steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) url() string {
	if f.kind == "openai" {
		return f.srv.URL + "/v1"
	}
	return f.srv.URL
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", 400)
		return
	}
	wantPath := "/v1/chat/completions"
	if f.kind == "anthropic" {
		wantPath = "/v1/messages"
	}
	if r.URL.Path != wantPath {
		http.Error(w, "wrong path "+r.URL.Path, 404)
		return
	}
	f.mu.Lock()
	f.attempts++
	if f.next >= len(f.script) {
		f.mu.Unlock()
		f.t.Errorf("%s: request %d is past the script's %d steps", f.kind, f.next+1, len(f.script))
		http.Error(w, "script exhausted", 500)
		return
	}
	step := f.script[f.next]
	f.next++
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if step.Status != 0 {
		w.Header().Set("retry-after-ms", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(step.Status)
		fmt.Fprintf(w, `{"error":{"type":"scripted","message":"scripted HTTP %d"}}`, step.Status)
		return
	}
	if step.WantTools != nil {
		if got := toolNames(f.kind, req); strings.Join(got, ",") != strings.Join(step.WantTools, ",") {
			f.t.Errorf("%s: request %d offers tools %v, want %v", f.kind, f.next, got, step.WantTools)
		}
	}
	// A scripted model refers to the candidate the conversation produced, as a real
	// model reads it from the tool result.
	cand := candidateRE.FindString(string(body))
	if found := candidateRE.FindAllString(string(body), -1); len(found) > 0 {
		cand = found[len(found)-1]
	}
	calls := make([]scriptCall, len(step.Calls))
	for i, c := range step.Calls {
		c.Arguments = strings.ReplaceAll(c.Arguments, "{{candidate_id}}", cand)
		calls[i] = c
	}
	step.Calls = calls
	stream, _ := req["stream"].(bool)
	if f.kind == "openai" {
		writeOpenAI(w, step, stream)
	} else {
		writeAnthropic(w, step, stream)
	}
}

func toolNames(kind string, req map[string]any) []string {
	names := []string{}
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		if kind == "openai" {
			fn, _ := m["function"].(map[string]any)
			names = append(names, fmt.Sprint(fn["name"]))
		} else {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names
}

// openAICompletion renders a step as a chat-completions answer.
func openAICompletion(step scriptStep) map[string]any {
	msg := map[string]any{"role": "assistant", "content": step.Text, "refusal": nil}
	finish := "stop"
	if step.Refuse {
		msg["content"], msg["refusal"] = nil, "I can't help with that."
	}
	if len(step.Calls) > 0 {
		var tcs []any
		for _, c := range step.Calls {
			tcs = append(tcs, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = tcs
		finish = "tool_calls"
	}
	return map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1767323045, "model": "scripted-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": step.Usage.Input, "completion_tokens": step.Usage.Output, "total_tokens": step.Usage.Input + step.Usage.Output},
	}
}

func writeOpenAI(w http.ResponseWriter, step scriptStep, stream bool) {
	c := openAICompletion(step)
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any, usage any) {
		ch := map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1767323045, "model": "scripted-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			ch["choices"] = []any{}
			ch["usage"] = usage
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if step.Refuse {
		chunk(map[string]any{"refusal": "I can't help with that."}, nil, nil)
	}
	// Text in two pieces, so streaming is visible.
	if t := step.Text; t != "" {
		half := len(t) / 2
		chunk(map[string]any{"content": t[:half]}, nil, nil)
		chunk(map[string]any{"content": t[half:]}, nil, nil)
	}
	for i, c := range step.Calls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil, nil)
		a := c.Arguments
		half := len(a) / 2
		for _, part := range []string{a[:half], a[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil, nil)
		}
	}
	choice := c["choices"].([]any)[0].(map[string]any)
	chunk(map[string]any{}, choice["finish_reason"], nil)
	chunk(nil, nil, c["usage"])
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// anthropicMessage renders a step as a Messages API answer.
func anthropicMessage(step scriptStep) map[string]any {
	content := []any{}
	if step.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": step.Text})
	}
	stop := "end_turn"
	for _, c := range step.Calls {
		var input any = c.Arguments
		if json.Valid([]byte(c.Arguments)) {
			input = json.RawMessage(c.Arguments)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
		stop = "tool_use"
	}
	if step.Refuse {
		stop = "refusal"
	}
	return map[string]any{
		"id": "msg_scripted", "type": "message", "role": "assistant", "model": "scripted-model",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": step.Usage.Input, "output_tokens": step.Usage.Output},
	}
}

func writeAnthropic(w http.ResponseWriter, step scriptStep, stream bool) {
	m := anthropicMessage(step)
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	start := map[string]any{}
	for k, v := range m {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = map[string]any{"input_tokens": step.Usage.Input, "output_tokens": 0}
	event("message_start", map[string]any{"message": start})
	for i, b := range m["content"].([]any) {
		blk := b.(map[string]any)
		switch blk["type"] {
		case "text":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			t := blk["text"].(string)
			half := len(t) / 2
			for _, part := range []string{t[:half], t[half:]} {
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": blk["id"], "name": blk["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(blk["input"])
			half := len(in) / 2
			for _, part := range []string{string(in[:half]), string(in[half:])} {
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": m["stop_reason"], "stop_sequence": nil}, "usage": map[string]any{"output_tokens": step.Usage.Output}})
	event("message_stop", map[string]any{})
}
