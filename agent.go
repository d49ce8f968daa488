package libos

import (
	"context"

	"github.com/agentlibos/libos/agent"
)

// AgentConfig returns cfg with this System as the kernel and its store as the durable
// log of the provider loop (package agent).
func (s *System) AgentConfig(cfg agent.Config) agent.Config {
	cfg.Kernel, cfg.Log = s.Kernel, s.st
	return cfg
}

// RunAgent drives process cfg.PID with a model API: prompt is the user's first message,
// and the loop runs until the model answers without a tool call, cfg.MaxSteps or
// cfg.BudgetTokens (see agent.Run). Build cfg.Provider with agent.NewProvider.
func (s *System) RunAgent(ctx context.Context, cfg agent.Config, prompt string) (*agent.Report, error) {
	return agent.Run(ctx, s.AgentConfig(cfg), prompt)
}

// ResumeAgent carries on run runID of process cfg.PID ("" for its latest unfinished
// run) from its last settled step (see agent.Resume).
func (s *System) ResumeAgent(ctx context.Context, cfg agent.Config, runID string) (*agent.Report, error) {
	return agent.Resume(ctx, s.AgentConfig(cfg), runID)
}
