//go:build !linux

package wasm

import "time"

// threadCPU falls back to wall time where the thread's CPU time is not at hand.
func threadCPU() time.Duration { return time.Since(monoBase) }
