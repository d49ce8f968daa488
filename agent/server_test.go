package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A transcript is a recorded conversation with a model API, kept in
// testdata/transcripts/<provider>/<session>.json in that provider's documented wire
// format: each exchange is the HTTP status and the JSON body the API answered with
// (a chat completion, a Messages API message, or the provider's error object). The
// same sessions exist for both providers. A body may say {{candidate_id}} where a
// real model repeats the candidate id the conversation gave it.
type transcript struct {
	Exchanges []exchange `json:"exchanges"`
}

type exchange struct {
	// Status, when set, is the HTTP error status the API answered with.
	Status int `json:"status,omitempty"`
	// WantTools, when set, must be exactly the tool names of this exchange's request.
	WantTools []string `json:"want_tools,omitempty"`
	// Body is the answer as the API sent it.
	Body json.RawMessage `json:"body"`
}

// A scriptStep is the provider-neutral reading of a recorded answer, from which a
// streamed answer is rendered as the provider's documented server-sent events.
type scriptStep struct {
	Text string // the assistant's text
	// Calls are the tool calls; Arguments is the OpenAI arguments string, or the
	// Anthropic input as compact JSON.
	Calls []scriptCall
	Usage struct{ Input, Output int64 }
	// Refuse: the model refused.
	Refuse bool
}

type scriptCall struct{ ID, Name, Arguments string }

// fakeProvider is a real HTTP server speaking one provider's wire format.
type fakeProvider struct {
	t        *testing.T
	kind     string
	script   []exchange
	srv      *httptest.Server
	mu       sync.Mutex
	next     int
	requests []map[string]any // every request body that reached the server, in order
	attempts int
}

var candidateRE = regexp.MustCompile(`tcand_[0-9a-f]{32}`)

// newFakeProvider serves the recorded session name of the provider kind.
func newFakeProvider(t *testing.T, kind, name string) *fakeProvider {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "transcripts", kind, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var tr transcript
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil || len(tr.Exchanges) == 0 {
		t.Fatalf("transcript %s/%s: %v (%d exchanges)", kind, name, err, len(tr.Exchanges))
	}
	f := &fakeProvider{t: t, kind: kind, script: tr.Exchanges}
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
	ex := f.script[f.next]
	f.next++
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if ex.WantTools != nil {
		if got := toolNames(f.kind, req); strings.Join(got, ",") != strings.Join(ex.WantTools, ",") {
			f.t.Errorf("%s: request %d offers tools %v, want %v", f.kind, f.next, got, ex.WantTools)
		}
	}
	// A scripted model refers to the candidate the conversation produced, as a real
	// model reads it from the tool result.
	cand := ""
	if found := candidateRE.FindAllString(string(body), -1); len(found) > 0 {
		cand = found[len(found)-1]
	}
	answer := bytes.ReplaceAll(ex.Body, []byte("{{candidate_id}}"), []byte(cand))
	w.Header().Set("Content-Type", "application/json")
	if ex.Status != 0 {
		w.Header().Set("retry-after-ms", "1")
		w.WriteHeader(ex.Status)
		_, _ = w.Write(answer)
		return
	}
	if stream, _ := req["stream"].(bool); stream {
		step, err := readStep(f.kind, answer)
		if err != nil {
			f.t.Errorf("%s: exchange %d: %v", f.kind, f.next, err)
			http.Error(w, err.Error(), 500)
			return
		}
		if f.kind == "openai" {
			writeOpenAI(w, step)
		} else {
			writeAnthropic(w, step)
		}
		return
	}
	_, _ = w.Write(answer)
}

// readStep reads a recorded answer in the provider's format back into its parts, to
// stream it.
func readStep(kind string, body []byte) (scriptStep, error) {
	var st scriptStep
	if kind == "openai" {
		var c struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					Refusal   *string `json:"refusal"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
			return st, fmt.Errorf("not a chat completion with one choice: %v", err)
		}
		m := c.Choices[0].Message
		if m.Content != nil {
			st.Text = *m.Content
		}
		st.Refuse = m.Refusal != nil
		for _, tc := range m.ToolCalls {
			st.Calls = append(st.Calls, scriptCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		st.Usage.Input, st.Usage.Output = c.Usage.Prompt, c.Usage.Completion
		return st, nil
	}
	var m struct {
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return st, fmt.Errorf("not a Messages API message: %v", err)
	}
	for _, blk := range m.Content {
		switch blk.Type {
		case "text":
			st.Text += blk.Text
		case "tool_use":
			var in bytes.Buffer
			if err := json.Compact(&in, blk.Input); err != nil {
				return st, err
			}
			st.Calls = append(st.Calls, scriptCall{ID: blk.ID, Name: blk.Name, Arguments: in.String()})
		}
	}
	st.Refuse = m.StopReason == "refusal"
	st.Usage.Input, st.Usage.Output = m.Usage.Input, m.Usage.Output
	return st, nil
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

// writeOpenAI streams a step as chat-completion chunks.
func writeOpenAI(w http.ResponseWriter, step scriptStep) {
	c := openAICompletion(step)
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

// writeAnthropic streams a step as Messages API events.
func writeAnthropic(w http.ResponseWriter, step scriptStep) {
	m := anthropicMessage(step)
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

// "The same scripted sessions run against both providers": every recorded session
// exists in both wire formats, and each answer reads back in its provider's format.
func TestTranscriptsCoverBothProviders(t *testing.T) {
	sessions := map[string][]string{}
	for _, kind := range []string{"openai", "anthropic"} {
		files, err := filepath.Glob(filepath.Join("testdata", "transcripts", kind, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s transcripts: %v", kind, err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			sessions[name] = append(sessions[name], kind)
			fp := newFakeProvider(t, kind, name)
			for i, ex := range fp.script {
				if ex.Status != 0 {
					continue
				}
				if _, err := readStep(kind, ex.Body); err != nil {
					t.Errorf("%s/%s exchange %d: %v", kind, name, i+1, err)
				}
			}
		}
	}
	for name, kinds := range sessions {
		if len(kinds) != 2 {
			t.Errorf("session %s is recorded only for %v", name, kinds)
		}
	}
}
