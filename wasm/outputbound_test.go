package wasm

import (
	"runtime"
	"testing"
	"time"
)

// "A result over the output bound is a typed error, not host memory": the guest's
// output is measured where it lies, in the guest's memory, and one over
// Limits.OutputBytes is refused without being copied into the host's heap (a guest
// with a memory cap of gigabytes would otherwise have the host allocate as much).
func TestOutputOverTheBoundIsNotCopied(t *testing.T) {
	e := newHostTestEngine(t, Config{MaxMemory: 256 << 20, PoolSize: 1})
	const size = 24 << 20
	opts := Options{Limits: Limits{WallTime: time.Minute, OutputBytes: 1 << 20}}
	// Warm the program's bytecode, so that the measured call compiles nothing.
	if _, err := e.Run(hostCtx(t), `function run() { return 1; }`, nil, nil, opts); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := e.Run(hostCtx(t), `function run() { return "x".repeat(24 << 20); }`, nil, nil, opts)
	runtime.ReadMemStats(&after)
	we := wantError(t, err, CodeLimitExceeded, LimitOutput)
	if want := "result is 25165826 bytes of JSON, over the limit of 1048576"; we.Message != want {
		t.Errorf("message %q, want %q", we.Message, want)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew >= size {
		t.Errorf("the host allocated %d bytes for a refused output of %d bytes", grew, size)
	}
	checkHealthy(t, e)
}
