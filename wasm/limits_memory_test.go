package wasm

import (
	"context"
	"strings"
	"testing"
	"unsafe"
)

// "Memory bombs ... each runaway case must stop within 2× the budget": a loop that
// allocates big blocks runs too little bytecode to reach the interpreter's poll (once in
// 10000 steps), so the guest's allocator polls too, once per MiB requested.
func TestGuestAllocatorPolls(t *testing.T) {
	h := newBareHost(t)
	status, out := h.run(t, `function run() { const a = []; for (let i = 0; i < 16; i++) a.push(new Uint8Array(1 << 20)); return a.length; }`)
	if status != 0 || out != "16" {
		t.Fatalf("status %d, %s", status, out)
	}
	if h.polls < 16 {
		t.Errorf("16 MiB allocated in 16 steps of bytecode polled %d times, want one poll per MiB", h.polls)
	}
}

// A stop the allocator hears is latched and ends the call as "interrupted", even when the
// program catches every error (the large allocations that fail in between are ordinary
// out-of-memory errors; the interrupt that follows is not).
func TestGuestAllocatorStop(t *testing.T) {
	for _, tc := range []struct{ name, program string }{
		{"typed arrays, every error caught", `function run() { const a = []; for (;;) { try { a.push(new Float64Array(1 << 17)); } catch (e) {} } }`},
		{"string doubling, every error caught", `function run() { let s = "ab"; const keep = []; for (;;) { try { s = s + s; keep.push(s + "!"); } catch (e) { s = "ab"; } } }`},
		{"a finally that continues", `function run() { for (;;) { try { new ArrayBuffer(1 << 20); } finally { continue; } } }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newBareHost(t)
			h.stopAt = 3
			status, out := h.run(t, tc.program)
			if status != 1 || !strings.Contains(out, `"code":"interrupted"`) {
				t.Fatalf("status %d, %s; want the interrupted error", status, out)
			}
			if h.polls > 100 {
				t.Errorf("%d polls after the stop at poll 3: the interrupt was not taken at once", h.polls)
			}
		})
	}
}

// The linear memory is reserved up front (internal/linmem): growing it is a change of
// length, never a copy of the whole memory into a new buffer, which for a memory of
// gigabytes took seconds in which nothing polled.
func TestMemoryGrowsInPlace(t *testing.T) {
	e := newHostTestEngine(t, Config{MaxMemory: 256 << 20, PoolSize: 1})
	ctx := context.Background()
	in, err := e.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.put(ctx, in)
	base := func() uintptr {
		b, ok := in.mem.Read(0, 1)
		if !ok {
			t.Fatal("memory unreadable")
		}
		return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	before, size := base(), in.mem.Size()
	mustRun(t, e, `function run() { const a = []; for (let i = 0; i < 40; i++) a.push(new Uint8Array(1 << 20)); return a.length; }`, "{}", nil, Options{})
	if in.mem.Size() < size+32<<20 {
		t.Fatalf("memory grew from %d to %d bytes only; the test needs it to grow", size, in.mem.Size())
	}
	if after := base(); after != before {
		t.Errorf("the memory moved from %#x to %#x when it grew: it was copied", before, after)
	}
}
