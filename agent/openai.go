package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
)

// openAI speaks chat completions through the official SDK: api.openai.com or any
// OpenAI-compatible server (llama.cpp's server, vLLM, Ollama) at BaseURL.
type openAI struct {
	cfg     ProviderConfig
	secrets secrets
	client  openai.Client
}

func newOpenAI(cfg ProviderConfig) *openAI {
	// The retries and the timeout are the exchange's (see exchange.roundTrip): the
	// SDK's sleep through a cancelled context.
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	// An empty key is sent as such (a local server needs none); the SDK would read
	// OPENAI_API_KEY itself otherwise, and the CLI already did.
	opts = append(opts, option.WithAPIKey(cfg.APIKey))
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	opts = append(opts, option.WithHTTPClient(httpClient(cfg)))
	return &openAI{cfg: cfg, secrets: secretsOf(cfg), client: openai.NewClient(opts...)}
}

func (*openAI) Name() string               { return "openai" }
func (*openAI) Rendering() render.Provider { return render.OpenAI }

func (o *openAI) UserMessage(text string) (json.RawMessage, error) {
	return json.Marshal(openai.UserMessage(text))
}

func (o *openAI) ToolResults(outs []Outcome) ([]json.RawMessage, error) {
	msgs := make([]json.RawMessage, 0, len(outs))
	for _, out := range outs {
		text := out.Text
		if out.Code != "" {
			text = "error: " + text
		}
		m, err := json.Marshal(openai.ToolMessage(text, out.Call.ID))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func (o *openAI) params(req Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: req.Model}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, raw := range req.Messages {
		var m openai.ChatCompletionMessageParamUnion
		if err := json.Unmarshal(raw, &m); err != nil {
			return p, errorf(CodeNotResumable, err, "a stored message is not a chat-completions message")
		}
		p.Messages = append(p.Messages, m)
	}
	return p, nil
}

func (o *openAI) Send(ctx context.Context, req Request, onText func(string)) (t *Turn, err error) {
	// A provider may echo the credentials it was sent: no error leaves with them.
	defer func() { err = o.secrets.scrub(err) }()
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	// Timeout covers every attempt and every wait between them.
	ctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	x := newExchange("openai", o.cfg, openaiStatus)
	opts := []option.RequestOption{
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return x.roundTrip(r, next)
		}),
	}
	if req.toolsSet() {
		opts = append(opts, option.WithJSONSet("tools", json.RawMessage(req.Tools)))
	}
	var msg openai.ChatCompletionMessage
	var usage openai.CompletionUsage
	var finish string
	if o.cfg.Stream {
		p.StreamOptions.IncludeUsage = openai.Bool(true)
		stream := o.client.Chat.Completions.NewStreaming(ctx, p, opts...)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			if !acc.AddChunk(chunk) {
				return nil, x.badResponse(nil, "openai stream has a chunk that does not continue the answer")
			}
			if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" && onText != nil {
				onText(chunk.Choices[0].Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			return nil, x.fail(ctx, err)
		}
		if len(acc.Choices) == 0 {
			return nil, x.badResponse(nil, "openai stream ended without a choice")
		}
		// A stream cut short ends without a finish reason, maybe in the middle of a
		// tool call's arguments: nothing of it is dispatched.
		if acc.Choices[0].FinishReason == "" {
			return nil, x.badResponse(nil, "openai stream ended before the answer finished (no finish_reason)")
		}
		msg, usage, finish = acc.Choices[0].Message, acc.Usage, string(acc.Choices[0].FinishReason)
	} else {
		res, err := o.client.Chat.Completions.New(ctx, p, opts...)
		if err != nil {
			return nil, x.fail(ctx, err)
		}
		if len(res.Choices) == 0 {
			return nil, x.badResponse(nil, "openai answer has no choice")
		}
		msg, usage, finish = res.Choices[0].Message, res.Usage, string(res.Choices[0].FinishReason)
		if onText != nil && msg.Content != "" {
			onText(msg.Content)
		}
	}
	t = &Turn{Text: msg.Content, Stop: finish, Attempts: x.attempts(),
		Usage: usageOf(usage.PromptTokens, usage.CompletionTokens)}
	if msg.Refusal != "" || finish == "content_filter" {
		return t, providerErr(CodeProviderRefused, 0, t.Attempts, nil, "%s", "the model refused: "+liberr.Clip(msg.Refusal+finish, 300))
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "function" {
			return t, providerErr(CodeProviderBadResponse, 0, t.Attempts, nil, "%s", "openai answer has a tool call of type "+tc.Type)
		}
		frame, err := json.Marshal(openAIFrame{ID: tc.ID, Type: "function", Function: openAIFrameFunction{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		if err != nil {
			return t, x.badResponse(err, "openai tool call cannot be encoded: "+liberr.Clip(err.Error(), 300))
		}
		t.Calls = append(t.Calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Frame: frame})
	}
	m, err := json.Marshal(msg.ToParam())
	if err != nil {
		return t, x.badResponse(err, "openai answer cannot be encoded: "+liberr.Clip(err.Error(), 300))
	}
	t.Message = m
	return t, nil
}

// openaiStatus is the HTTP status inside the SDK's API error.
func openaiStatus(err error) (int, bool) {
	var api *openai.Error
	if !errors.As(err, &api) {
		return 0, false
	}
	return api.StatusCode, true
}

// openAIFrame is a chat-completions tool call as the adapter reads it. Arguments is the
// model's string, untouched.
type openAIFrame struct {
	ID       string              `json:"id"`
	Type     string              `json:"type"`
	Function openAIFrameFunction `json:"function"`
}

type openAIFrameFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
