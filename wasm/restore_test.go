package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// markerProgram builds a marker at run time (its bytes are in no program text) and fills
// megabytes with it, more than the snapshot's free space, so that the memory grows.
const markerProgram = `function run() {
	const m = ["k9", "Qz", "7w"].join("|");
	globalThis.keep = m.repeat(1 << 20);
	return keep.length;
}`

var marker = []byte("k9|Qz|7w")

// ABI.md, "The snapshot": "every call starts from the prepared state exactly as it was
// built, with no trace of an earlier call". Memory that an earlier call grew stays with
// the instance as free space to the restored allocator, and must hold none of that call's
// bytes: neither in the host's view of the pooled instance, nor in what a later call's
// fresh buffers hold.
func TestRunLeavesNoBytesBehind(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	res := mustRun(t, e, markerProgram, `{}`, nil, Options{})
	snapEnd := int64(e.snapFrom) + int64(len(e.snap))
	if res.Stats.PeakMemory <= snapEnd {
		t.Fatalf("the call's memory (%d bytes) did not grow past the snapshot's end (%d): nothing tested", res.Stats.PeakMemory, snapEnd)
	}
	in, err := e.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := in.mem.Read(0, in.mem.Size())
	if i := bytes.Index(mem, marker); i >= 0 {
		t.Errorf("the pooled instance holds the earlier call's bytes at %#x (the snapshot ends at %#x, the memory at %#x)", i, snapEnd, len(mem))
	}
	e.put(context.Background(), in)

	// The same from inside: fresh typed arrays and buffers of a later call on that
	// instance hold nothing of it (the first byte of the marker, 'k', is 107).
	reader := `function run() {
		const a = new Uint8Array(8 << 20), b = new ArrayBuffer(8 << 20).slice(0), c = new Float64Array(1 << 20);
		return [a.indexOf(107), new Uint8Array(b).indexOf(107), new Uint8Array(c.buffer).indexOf(107)];
	}`
	if res := mustRun(t, e, reader, `{}`, nil, Options{}); string(res.Value) != `[-1,-1,-1]` {
		t.Errorf("a later call's fresh buffers hold non-zero bytes at %s", res.Value)
	}
}

// RATIONALE.md: "the guest's own sbrk keeps the break in memory, so a restored allocator
// reuses the pages an earlier call grew": the same call, repeated on one instance, runs
// in the memory the first one grew instead of growing it further.
func TestRunReusesGrownMemory(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	first := mustRun(t, e, markerProgram, `{}`, nil, Options{}).Stats.PeakMemory
	for i := 2; i <= 4; i++ {
		if got := mustRun(t, e, markerProgram, `{}`, nil, Options{}).Stats.PeakMemory; got != first {
			t.Fatalf("call %d ended with %d bytes of memory, the first with %d: the restored allocator did not reuse the grown pages", i, got, first)
		}
	}
}

// ABI.md, "The snapshot": "every call starts from the prepared state exactly as it was
// built, with no trace of an earlier call", and the host does not take the guest's word
// for where a call wrote. A Syscaller stands in for a guest that writes where no guest
// keeping the ABI would (as one that QuickJS's own bugs let loose could): at the deep end
// of the shadow stack and just below its top, in the prepared state, past the break in
// memory it grew, at the very end of the memory; and in the fuel global. After the call
// the pooled instance must be the snapshot image exactly: zero below it, the snapshot,
// zero after it; and a later call must do exactly what it does on a fresh instance.
func TestRestoreLeavesNothingAnywhere(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	ctx := context.Background()
	probe := `async function run(a, libos) { const r = await libos.syscall("clock.now", {}); return {r, x: [1, 2, 3].map(n => n * a.k)}; }`
	clean := mustRun(t, e, probe, `{"k":7}`, echoSyscaller, Options{Seed: 1})

	in, err := e.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.put(ctx, in)
	from, end := e.snapFrom, e.snapFrom+uint32(len(e.snap))
	fill := bytes.Repeat(marker, 512) // 4 KiB
	var wrote []uint32
	scribble := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		// The call's own frames are in the top few KiB of the stack while it waits here.
		if _, ok := in.mem.Grow(8); !ok {
			t.Error("cannot grow the memory")
		}
		size := in.mem.Size()
		for _, at := range []uint32{0, 300 << 10, from - 48<<10, end - 8<<10, size - 40<<10, size - uint32(len(fill))} {
			if !in.mem.Write(at, fill) {
				t.Errorf("cannot write at %#x", at)
			}
			wrote = append(wrote, at)
		}
		in.fuel.Set(1 << 50)
		return args, nil
	})
	mustRun(t, e, probe, `{"k":7}`, scribble, Options{Seed: 1})
	if len(wrote) == 0 {
		t.Fatal("the syscall that writes everywhere was not made: nothing tested")
	}

	got, err := e.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != in {
		t.Fatal("the pool handed out another instance: nothing tested")
	}
	mem, _ := got.mem.Read(0, got.mem.Size())
	if i := firstNonZero(mem[:from]); i >= 0 {
		t.Errorf("the shadow stack holds a non-zero byte at %#x after the restore (the stack ends at %#x)", i, from)
	}
	if !bytes.Equal(mem[from:end], e.snap) {
		t.Errorf("the prepared state differs from the snapshot after the restore")
	}
	if i := firstNonZero(mem[end:]); i >= 0 {
		t.Errorf("the memory past the snapshot holds a non-zero byte at %#x after the restore (it ends at %#x)", int(end)+i, len(mem))
	}
	if i := bytes.Index(mem, marker); i >= 0 {
		t.Errorf("the pooled instance holds the written bytes at %#x (written at %#x)", i, wrote)
	}
	e.put(ctx, got)

	again := mustRun(t, e, probe, `{"k":7}`, echoSyscaller, Options{Seed: 1})
	if string(again.Value) != string(clean.Value) || again.Stats.Fuel != clean.Stats.Fuel {
		t.Errorf("after the scribbling call: %s with %d fuel; on a fresh instance: %s with %d fuel", again.Value, again.Stats.Fuel, clean.Value, clean.Stats.Fuel)
	}
}

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// ABI.md, "The snapshot": "every call starts from the prepared state exactly as it was
// built". A new instance is given the snapshot instead of being prepared; its memory then
// already holds the guest's data segments, and a byte that prepare cleared in a block the
// snapshot holds as all zero must not survive. Bytes planted in a fresh instance where the
// image is zero (the shadow stack below the snapshot, an all-zero block of it and past it,
// where the memory reaches so far) stand in for them: after the snapshot is written the
// instance is the snapshot image exactly.
func TestNewInstanceIsTheSnapshotExactly(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	ctx := context.Background()
	mustRun(t, e, `function run() { return 1; }`, `{}`, nil, Options{})
	from, end := e.snapFrom, e.snapFrom+uint32(len(e.snap))
	in, err := e.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close(ctx)
	zeroAt := -1
	for i := 0; i+4<<10 <= len(e.snap) && from+uint32(i+4<<10) <= in.mem.Size(); i += 4 << 10 {
		if firstNonZero(e.snap[i:i+4<<10]) < 0 {
			zeroAt = i
			break
		}
	}
	fill := bytes.Repeat(marker, 512) // 4 KiB
	at := []uint32{0, from - uint32(len(fill))}
	if zeroAt >= 0 {
		at = append(at, from+uint32(zeroAt))
	}
	if size := in.mem.Size(); size > end {
		at = append(at, size-uint32(len(fill)))
	}
	for _, at := range at {
		if !in.mem.Write(at, fill) {
			t.Fatalf("cannot write at %#x", at)
		}
	}
	e.snapMu.Lock()
	ok := in.restoreRuns(e.snap, e.snapFrom, e.snapRuns)
	e.snapMu.Unlock()
	if !ok {
		t.Fatal("restoreRuns failed")
	}
	mem, _ := in.mem.Read(0, in.mem.Size())
	if i := firstNonZero(mem[:from]); i >= 0 {
		t.Errorf("a new instance holds a non-zero byte at %#x below the snapshot", i)
	}
	if !bytes.Equal(mem[from:end], e.snap) {
		t.Errorf("a new instance differs from the snapshot")
	}
	if i := firstNonZero(mem[end:]); i >= 0 {
		t.Errorf("a new instance holds a non-zero byte at %#x past the snapshot", int(end)+i)
	}
}

// ABI.md, "The snapshot": "every call starts from the prepared state exactly as it was
// built, with no trace of an earlier call", also when the caller takes the restore off
// its answer's path (Options.Defer): until the work it was handed has run and is done,
// the used instance is in no one's hands (a later call gets another instance, which is
// the snapshot image), and afterwards the pooled instance is the snapshot image exactly
// and runs as a fresh one does. The work runs once however often it is called, and
// Close waits for one in progress.
func TestDeferredRestoreLeavesNothing(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 2})
	ctx := context.Background()
	clean := mustRun(t, e, markerProgram, `{}`, nil, Options{})

	var restore func()
	res, err := e.Run(ctx, markerProgram, json.RawMessage(`{}`), nil, Options{Defer: func(fn func()) {
		if restore != nil {
			t.Error("Defer was handed work twice for one call")
		}
		restore = fn
	}})
	if err != nil || string(res.Value) != string(clean.Value) {
		t.Fatalf("deferred call: %s, %v; want %s", res.Value, err, clean.Value)
	}
	if restore == nil {
		t.Fatal("Run did not hand the restore to Defer")
	}
	t.Cleanup(restore) // Close waits for it, should the test stop early
	e.mu.Lock()
	pooled := len(e.idle)
	e.mu.Unlock()
	if pooled != 0 {
		t.Fatalf("%d instances in the pool before the deferred restore ran; want none (the call took the only one)", pooled)
	}
	// The instance left for the deferred restore holds the call's bytes; the one a
	// later call gets instead does not.
	other, err := e.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshotImage(t, e, other, "the instance a call gets while another's restore is deferred")
	e.put(ctx, other)

	restore()
	restore() // a second run is a no-op
	e.mu.Lock()
	for e.restoring > 0 {
		e.restored.Wait()
	}
	pooled = len(e.idle)
	e.mu.Unlock()
	if pooled != 2 {
		t.Fatalf("%d instances pooled after the deferred restore; want 2", pooled)
	}
	for range 2 {
		in, err := e.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkSnapshotImage(t, e, in, "a pooled instance after the deferred restore")
		defer e.put(ctx, in)
	}
	if again := mustRun(t, e, markerProgram, `{}`, nil, Options{}); string(again.Value) != string(clean.Value) || again.Stats.Fuel != clean.Stats.Fuel {
		t.Errorf("after the deferred restore: %s with %d fuel; on a fresh instance: %s with %d fuel", again.Value, again.Stats.Fuel, clean.Value, clean.Stats.Fuel)
	}
}

// Close waits for a restore handed to Defer: the instance is counted as a call in flight
// until the deferred work has run, so that the runtime is never closed under it.
func TestCloseWaitsForADeferredRestore(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	ctx := context.Background()
	var restore func()
	if _, err := e.Run(ctx, `function run() { return 1; }`, nil, nil, Options{Defer: func(fn func()) { restore = fn }}); err != nil || restore == nil {
		t.Fatalf("Run: %v; restore handed over: %v", err, restore != nil)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the deferred restore ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	restore()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// checkSnapshotImage fails unless in's memory is zero below the snapshot, the snapshot,
// and zero after it.
func checkSnapshotImage(t *testing.T, e *Engine, in *instance, what string) {
	t.Helper()
	from, end := e.snapFrom, e.snapFrom+uint32(len(e.snap))
	mem, _ := in.mem.Read(0, in.mem.Size())
	if i := firstNonZero(mem[:from]); i >= 0 {
		t.Errorf("%s: a non-zero byte at %#x below the snapshot", what, i)
	}
	if !bytes.Equal(mem[from:end], e.snap) {
		t.Errorf("%s: the prepared state differs from the snapshot", what)
	}
	if i := firstNonZero(mem[end:]); i >= 0 {
		t.Errorf("%s: a non-zero byte at %#x past the snapshot", what, int(end)+i)
	}
	if i := bytes.Index(mem, marker); i >= 0 {
		t.Errorf("%s: an earlier call's bytes at %#x", what, i)
	}
}
