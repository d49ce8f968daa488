package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
)

// wrapper is a handler's own typed error that carries a cause, as package tools'
// errors do.
type wrapper struct {
	code string
	err  error
}

func (e *wrapper) Error() string     { return "tool: " + e.code + ": " + e.err.Error() }
func (e *wrapper) ErrorCode() string { return e.code }
func (e *wrapper) Unwrap() error     { return e.err }

// "A returned error settles the call as failed: its code is kept when the error has
// one", and when a handler's typed error wraps an *engine.Error (a nested call's
// refusal, say), "the outermost error that has a code must win": the code the model
// and the tool_failed event see is the handler's, not the one it wraps.
func TestHandlerErrorOutermostCodeWins(t *testing.T) {
	inner := &engine.Error{Code: engine.CodeUnknownTool, Message: `no tool named "x" in this process's projection`}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"typed error wrapping an engine error: the typed one's code", &wrapper{"capability_denied", inner}, "capability_denied"},
		{"the same, wrapped once more without a code", fmt.Errorf("while running: %w", &wrapper{"budget_exceeded", inner}), "budget_exceeded"},
		{"an engine error wrapping a typed error: the engine's code", &engine.Error{Code: engine.CodeOutputInvalid, Err: &wrapper{"capability_denied", errors.New("x")}}, "output_invalid"},
		{"an uncoded wrapper of an engine error: the engine's code", fmt.Errorf("nested: %w", inner), "unknown_tool"},
		{"a typed error with an empty code does not hide a coded one", &wrapper{"", inner}, "unknown_tool"},
		{"joined errors: the first coded one, in errors.As order", errors.Join(errors.New("plain"), &wrapper{"limit_exceeded", inner}, codedErr{"capability_denied"}), "limit_exceeded"},
		{"no code anywhere: tool_failed", fmt.Errorf("plain: %w", errors.New("cause")), "tool_failed"},
	}
	var current error
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{builtin("fails", `{"type":"object"}`, "", func(context.Context, *engine.Call) (json.RawMessage, error) {
		return nil, current
	})}})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"fails"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			current = c.err
			_, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"fails","arguments":{}}`))
			if got := codeOf(err); got != c.want {
				t.Fatalf("call failed with %q, want %q (%v)", got, c.want, err)
			}
			if got := string(liberr.CodeOr(c.err, liberr.CodeToolFailed)); got != c.want {
				t.Fatalf("CodeOr = %q, want %q", got, c.want)
			}
			evs := e.events(t, pid)
			if last := lastOf(t, evs, engine.EventToolFailed); field(t, last, "code") != c.want {
				t.Fatalf("tool_failed records %v, want %q", field(t, last, "code"), c.want)
			}
		})
	}
}
