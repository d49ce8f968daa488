package store

import (
	"context"
	"sync/atomic"
)

// Quota bounds what the writes made under one context may add to the store: how many
// events they append, how many bytes of event data, and how long and how large a log
// may grow. The
// kernel gives each top-level call its own Quota, so that one call fanning out through
// nested calls cannot write without bound, and sets MaxSeq from the process's limits.
// A Quota is mechanism: the numbers are the caller's.
//
// A settlement (tool_result, tool_failed, unknown_settlement) is counted but never
// refused: refusing it would leave an opened call without a settlement. Calls nest and
// settle before the next opens, so at most the chain of calls open at once (bounded by
// the nesting depth) settles past the bound.
type Quota struct {
	MaxEvents int64  // events appended under the context; 0 means no bound
	MaxBytes  int64  // bytes of their data; 0 means no bound
	MaxSeq    uint64 // no log grows past this sequence number; 0 means no bound
	// MaxLogBytes: no log grows past this many bytes of event data in total (counted
	// in its head record, so across restarts); 0 means no bound.
	MaxLogBytes uint64

	events, bytes atomic.Int64
}

// Used returns the events and bytes charged so far.
func (q *Quota) Used() (events, bytes int64) { return q.events.Load(), q.bytes.Load() }

type quotaKey struct{}

// WithQuota returns ctx carrying q: every event appended by Update, UpdateDeferred or
// Append under the returned context is charged to q.
func WithQuota(ctx context.Context, q *Quota) context.Context {
	return context.WithValue(ctx, quotaKey{}, q)
}

// QuotaFrom returns the Quota ctx carries, or nil.
func QuotaFrom(ctx context.Context) *Quota {
	q, _ := ctx.Value(quotaKey{}).(*Quota)
	return q
}

// charge counts one event of n data bytes at seq, appended to a log holding logBytes,
// or refuses it with limit_exceeded.
func (q *Quota) charge(pid, typ string, seq, logBytes uint64, n int) error {
	if q == nil {
		return nil
	}
	if isSettlement(typ) {
		q.events.Add(1)
		q.bytes.Add(int64(n))
		return nil
	}
	if q.MaxSeq > 0 && seq > q.MaxSeq {
		return errorf(CodeLimitExceeded, nil, "event log of %s holds its limit of %d events", pid, q.MaxSeq)
	}
	if q.MaxLogBytes > 0 && logBytes+uint64(n) > q.MaxLogBytes {
		return errorf(CodeLimitExceeded, nil, "event log of %s holds %d bytes of its limit of %d; %s of %d bytes would pass it", pid, logBytes, q.MaxLogBytes, typ, n)
	}
	if ev := q.events.Add(1); q.MaxEvents > 0 && ev > q.MaxEvents {
		q.events.Add(-1)
		return errorf(CodeLimitExceeded, nil, "one call may append at most %d events; %s would be one more", q.MaxEvents, typ)
	}
	if b := q.bytes.Add(int64(n)); q.MaxBytes > 0 && b > q.MaxBytes {
		q.bytes.Add(-int64(n))
		q.events.Add(-1)
		return errorf(CodeLimitExceeded, nil, "one call may append at most %d bytes of events; %s of %d bytes would pass it", q.MaxBytes, typ, n)
	}
	return nil
}
