package engine

import "context"

// Progress of a long call. A tool that works in steps (validate_jit_tool runs one
// test after another) reports each step finished through the call's context; the
// transport that carries the call turns the reports into its protocol's progress
// notifications (MCP: notifications/progress, when the client sent a progress token).
// A call whose context carries no reporter reports nothing.

type progressKey struct{}

// ProgressFunc receives the steps of a call: done of total finished, and what the
// last one was. It must not block for long: the call waits for it.
type ProgressFunc func(done, total int, message string)

// WithProgress returns ctx for a call whose progress goes to fn.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress tells the call's reporter, if any, that done of total steps are
// finished.
func ReportProgress(ctx context.Context, done, total int, message string) {
	if fn, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && fn != nil {
		fn(done, total, message)
	}
}
