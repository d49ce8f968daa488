package wasm

import (
	"bytes"
	"context"
	"testing"
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
