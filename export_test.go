package libos

import "time"

// Crash stops s as the loss of its machine would (see crash).
func Crash(s *System) { s.crash() }

// WithStoreClock returns o with now as the store's clock: it runs at the start of
// every write transaction, on the writer's goroutine.
func WithStoreClock(o Options, now func() time.Time) Options {
	o.storeClock = now
	return o
}
