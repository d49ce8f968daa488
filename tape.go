package libos

import (
	"context"

	"github.com/agentlibos/libos/tools"
)

// Tape exports settled JIT tool call callID of process pid as a test case {args,
// expected, syscalls}, from the call's syscall journal (tools.ExportTape): what
// `libos tape` prints. A refusal is an error whose code names the reason
// (call_not_found, call_unsettled, not_jit_tool, journal_truncated, export_forbidden,
// not_replayable, journal_corrupt: an edited store is never exported, limit_exceeded:
// a test over the bounds no validation would accept).
func (s *System) Tape(pid, callID string) (tools.TestCase, error) {
	return tools.ExportTape(s.st, pid, callID)
}

// Replay runs the registered code of call callID of pid again against its journal and
// reports "same" or the first difference (tools.Replay): what `libos replay` prints.
func (s *System) Replay(ctx context.Context, pid, callID string, opts tools.ReplayOptions) (tools.ReplayResult, error) {
	return tools.Replay(ctx, s.st, s.sandbox, pid, callID, opts)
}

// ReplayAll replays every JIT tool call of pid (tools.ReplayAll); tools.Summary counts
// the verdicts.
func (s *System) ReplayAll(ctx context.Context, pid string, opts tools.ReplayOptions) ([]tools.ReplayResult, error) {
	return tools.ReplayAll(ctx, s.st, s.sandbox, pid, opts)
}
