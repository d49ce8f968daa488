package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
)

// anthropicProvider speaks the Messages API through the official SDK.
type anthropicProvider struct {
	cfg     ProviderConfig
	secrets secrets
	client  anthropic.Client
}

func newAnthropic(cfg ProviderConfig) *anthropicProvider {
	// The retries and the timeout are the exchange's (see exchange.roundTrip): the
	// SDK's would wait as long as Retry-After says, past Timeout.
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	opts = append(opts, option.WithHTTPClient(httpClient(cfg)))
	return &anthropicProvider{cfg: cfg, secrets: secretsOf(cfg), client: anthropic.NewClient(opts...)}
}

func (*anthropicProvider) Name() string               { return "anthropic" }
func (*anthropicProvider) Rendering() render.Provider { return render.Anthropic }

func (a *anthropicProvider) UserMessage(text string) (json.RawMessage, error) {
	return json.Marshal(anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
}

// ToolResults answers all of a turn's tool_use blocks in one user message, in order.
func (a *anthropicProvider) ToolResults(outs []Outcome) ([]json.RawMessage, error) {
	if len(outs) == 0 {
		return nil, nil
	}
	blocks := make([]anthropic.ContentBlockParamUnion, 0, len(outs))
	for _, out := range outs {
		blocks = append(blocks, anthropic.NewToolResultBlock(out.Call.ID, out.Text, out.Code != ""))
	}
	m, err := json.Marshal(anthropic.NewUserMessage(blocks...))
	if err != nil {
		return nil, err
	}
	return []json.RawMessage{m}, nil
}

func (a *anthropicProvider) Send(ctx context.Context, req Request, onText func(string)) (t *Turn, err error) {
	// A provider may echo the credentials it was sent: no error leaves with them.
	defer func() { err = a.secrets.scrub(err) }()
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: a.cfg.MaxTokens}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, raw := range req.Messages {
		var m anthropic.MessageParam
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, errorf(CodeNotResumable, err, "a stored message is not a Messages API message")
		}
		p.Messages = append(p.Messages, m)
	}
	// Timeout covers every attempt and every wait between them.
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	x := newExchange("anthropic", a.cfg, anthropicStatus)
	opts := []option.RequestOption{
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return x.roundTrip(r, next)
		}),
	}
	if req.toolsSet() {
		opts = append(opts, option.WithJSONSet("tools", json.RawMessage(req.Tools)))
	}
	var msg anthropic.Message
	if a.cfg.Stream {
		stream := a.client.Messages.NewStreaming(ctx, p, opts...)
		stopped := false
		for stream.Next() {
			ev := stream.Current()
			stopped = stopped || ev.Type == "message_stop"
			if err := msg.Accumulate(ev); err != nil {
				return nil, x.badResponse(err, "anthropic stream: "+liberr.Clip(err.Error(), 300))
			}
			if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok && onText != nil {
				if t, ok := d.Delta.AsAny().(anthropic.TextDelta); ok && t.Text != "" {
					onText(t.Text)
				}
			}
		}
		if err := stream.Err(); err != nil {
			return nil, x.fail(ctx, err)
		}
		if msg.ID == "" {
			return nil, x.badResponse(nil, "anthropic stream ended without a message")
		}
		// A stream cut short ends without message_stop, maybe in the middle of a
		// tool_use block's input: nothing of it is dispatched.
		if !stopped {
			return nil, x.badResponse(nil, "anthropic stream ended before the answer finished (no message_stop)")
		}
	} else {
		res, err := a.client.Messages.New(ctx, p, opts...)
		if err != nil {
			return nil, x.fail(ctx, err)
		}
		msg = *res
	}
	t = &Turn{Stop: string(msg.StopReason), Attempts: x.attempts(),
		Usage: usageOf(msg.Usage.InputTokens, msg.Usage.OutputTokens)}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			t.Text += b.Text
		case "tool_use":
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("null")
			}
			frame, err := json.Marshal(anthropicFrame{Type: "tool_use", ID: b.ID, Name: b.Name, Input: input})
			if err != nil {
				return t, x.badResponse(err, "anthropic tool_use block cannot be encoded: "+liberr.Clip(err.Error(), 300))
			}
			t.Calls = append(t.Calls, ToolCall{ID: b.ID, Name: b.Name, Frame: frame})
		}
	}
	if !a.cfg.Stream && onText != nil && t.Text != "" {
		onText(t.Text)
	}
	if msg.StopReason == anthropic.StopReasonRefusal {
		return t, providerErr(CodeProviderRefused, 0, t.Attempts, nil, "%s", "the model refused to answer")
	}
	m, err := json.Marshal(msg.ToParam())
	if err != nil {
		return t, x.badResponse(err, "anthropic answer cannot be encoded: "+liberr.Clip(err.Error(), 300))
	}
	t.Message = m
	return t, nil
}

// anthropicStatus is the HTTP status inside the SDK's API error.
func anthropicStatus(err error) (int, bool) {
	var api *anthropic.Error
	if !errors.As(err, &api) {
		return 0, false
	}
	return api.StatusCode, true
}

// anthropicFrame is a tool_use block as the adapter reads it. Input is the model's
// object, as sent.
type anthropicFrame struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}
