package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// twoFuncs is (module (func (result i32) i32.const 1) (func (result i32) i32.const 2)).
var twoFuncs = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () → i32
	0x03, 0x03, 0x02, 0x00, 0x00, // two functions of type 0
	0x0a, 0x0b, 0x02, 0x04, 0x00, 0x41, 0x01, 0x0b, 0x04, 0x00, 0x41, 0x02, 0x0b,
}

// The layout is read from what wazero itself wrote, and a sample is attributed only to
// code proven to be this module's: the mapping is found by comparing its bytes (doc.go).
func TestCacheEntryLocatesTheCompiledCodeInMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache))
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, twoFuncs); err != nil {
		t.Fatal(err)
	}
	c, err := readCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.offsets) != 2 || c.offsets[0] != 0 || c.offsets[1] <= 0 || c.offsets[1]%16 != 0 {
		t.Fatalf("offsets %v: want two functions, the second 16-byte aligned after the first", c.offsets)
	}
	if fn, in := c.function(c.offsets[1] + 1); fn != 1 || in != 1 {
		t.Fatalf("function(offsets[1]+1) = %d, %d; want 1, 1", fn, in)
	}
	if c.size(0)+c.size(1) != len(c.code) {
		t.Fatalf("sizes %d + %d do not cover the %d bytes", c.size(0), c.size(1), len(c.code))
	}
	base, err := findMapping(os.Getpid(), c)
	if err != nil {
		t.Fatal(err)
	}
	if base == 0 || base%4096 != 0 {
		t.Fatalf("mapping at %#x: want a page-aligned address", base)
	}
	// Another module's bytes are never taken for it.
	other := &compiled{code: append([]byte{0xcc}, c.code...), cacheFile: "other"}
	if _, err := findMapping(os.Getpid(), other); err == nil {
		t.Fatal("findMapping accepted bytes no mapping holds")
	}
	if _, err := parseCacheEntry([]byte("WAZEVO")); err == nil {
		t.Fatal("a truncated entry parsed")
	}
}

// Names come from wasm-ld's map: CODE's input chunks, in order; symbols and other
// sections' chunks (the dispatch table in .rodata) are not functions.
func TestLinkMapNamesCodeChunksInOrder(t *testing.T) {
	f, err := os.Open("testdata/guest.map")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := parseLinkMap(f)
	if err != nil {
		t.Fatal(err)
	}
	want := "__wasm_call_ctors _initialize pstrcpy JS_CallInternal async_func_init __multi3"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("names %q, want %q", got, want)
	}
	if _, err := parseLinkMap(strings.NewReader("header\n       -      bc5    b65a4 CODE\n       -      bc7        3         nonsense\n")); err == nil {
		t.Fatal("a CODE entry that is not file:(function) was accepted")
	}
}

// The kinds follow wazero's shapes: in the guest's dispatch block, the fuel check, the two
// bounds checks (the opcode byte and the dispatch table's entry), the frame traffic and
// the br_table's jump.
func TestClassifyWazeroDispatchBlock(t *testing.T) {
	b, err := os.ReadFile("testdata/dispatch.objdump")
	if err != nil {
		t.Fatal(err)
	}
	insns := parseObjdump(string(b))
	if len(insns) != 64 { // a92f8 to a9422; objdump's continuation lines are folded
		t.Fatalf("%d instructions", len(insns))
	}
	kinds := classify(insns)
	kind := map[int]string{}
	count := map[string]int{}
	for i, in := range insns {
		kind[in.off] = kinds[i]
		count[kinds[i]]++
	}
	for off, want := range map[int]string{
		0xa92f8: kindSpill,    // mov %r9d,0x374(%rsp)
		0xa9315: kindFuel,     // mov 0x150(%rsp),%rax: the fuel counter's reload
		0xa9321: kindFuel,     // cmp $0x0,%rax
		0xa935f: kindFuel,     // mov %rax,0x17c(%rsp): its spill
		0xa9370: kindBounds,   // mov 0x10(%rdx),%ebx: the memory's length
		0xa9380: kindBounds,   // jae over the trap exit
		0xa9386: kindTrapExit, // mov %rsp,0x38(%rdi)
		0xa93b0: kindOther,    // movzbq (%rsi,%rcx,1),%rcx: the opcode's load itself
		0xa93d7: kindBounds,
		0xa9404: kindOther, // the dispatch table's entry
		0xa9413: kindBrTable,
		0xa9422: kindBrTable, // jmp *%r8
	} {
		if kind[off] != want {
			t.Errorf("%x: %s, want %s", off, kind[off], want)
		}
	}
	if count[kindBounds] != 11 || count[kindBrTable] != 7 || count[kindFuel] != 5 {
		t.Errorf("kinds %v", count)
	}
	block, jump := dispatchBlock(append(insns, insn{off: 0xfffff, text: "jmp 0xa92f8"}))
	n := 0
	for i := range insns {
		if block[i] {
			n++
		} else if kinds[i] != kindTrapExit {
			t.Errorf("%x (%s) left out of the dispatch block", insns[i].off, kinds[i])
		}
	}
	if jump < 0 || insns[jump].off != 0xa9422 || n != 64-18 {
		t.Errorf("dispatch block of %d instructions up to %d", n, jump)
	}
}

func TestReg64(t *testing.T) {
	for in, want := range map[string]string{"%ecx": "%rcx", "%r8d": "%r8", "%r10": "%r10", "%rax": "%rax", "$0x4": "$0x4", "%r11w": "%r11"} {
		if got := reg64(in); got != want {
			t.Errorf("reg64(%s) = %s, want %s", in, got, want)
		}
	}
}

// The dispatch table is read from the module's data segment at the address the map gives,
// not at the map's file offset, which wasm-ld computes before the section's LEB128 sizes
// are final (names.go).
func TestDispatchTableIsReadAtItsAddress(t *testing.T) {
	f, err := os.Open("testdata/guest.map")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr, size, err := mapChunk(f, ".rodata.JS_CallInternal.dispatch_table")
	if err != nil {
		t.Fatal(err)
	}
	if addr != 0x10e9c0 || size != 0x400 {
		t.Fatalf("chunk at %#x+%#x, want 0x10e9c0+0x400", addr, size)
	}
	// A module with one memory and one active segment of 8 bytes at 0x100 (i32.const
	// 0x100 is 41 80 02); its size LEB is padded to five bytes, as wasm-ld writes some.
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01, // memory: one, min 1 page
		0x0b, 0x13, 0x01, 0x00, 0x41, 0x80, 0x02, 0x0b, 0x88, 0x80, 0x80, 0x80, 0x00,
		1, 2, 3, 4, 5, 6, 7, 8}
	got, err := dataAt(mod, 0x104, 4)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "\x05\x06\x07\x08" {
		t.Fatalf("dataAt(0x104, 4) = %v", got)
	}
	if _, err := dataAt(mod, 0x106, 4); err == nil {
		t.Fatal("a range past the segment was read")
	}
	if _, err := dataAt(twoFuncs, 0, 1); err == nil {
		t.Fatal("a module without data gave bytes")
	}
}

// A sample goes to the handler whose control flow reaches it, whatever the layout: here
// handler A jumps over B's code to its own tail, and both reach a shared block.
func TestPerOpcodeFollowsControlFlow(t *testing.T) {
	insns := []insn{
		{off: 0x00, text: "mov %eax,%ecx", samples: 1},  // A
		{off: 0x02, text: "jmp 0x20", samples: 0},       // A → its tail
		{off: 0x10, text: "add $0x1,%eax", samples: 2},  // B
		{off: 0x12, text: "jne 0x30", samples: 0},       // B → shared
		{off: 0x14, text: "jmp 0x40", samples: 0},       // B → dispatch
		{off: 0x20, text: "mov %ecx,%edx", samples: 4},  // A's tail
		{off: 0x22, text: "jmp 0x30", samples: 0},       // A → shared
		{off: 0x30, text: "mov %edx,%eax", samples: 8},  // shared
		{off: 0x32, text: "jmp 0x40", samples: 0},       // → dispatch
		{off: 0x40, text: "jmp *%r8", samples: 16},      // dispatch
		{off: 0x50, text: "mov %eax,%eax", samples: 32}, // unreachable from A and B
	}
	per := perOpcode(insns, map[int]int{1: 0x00, 2: 0x10}, func(i int) bool { return insns[i].off == 0x40 }, 0)
	want := map[int]int{1: 1 + 4, 2: 2, -1: 8, -2: 32}
	for k, n := range want {
		if per[k] != n {
			t.Errorf("per[%d] = %d, want %d (all %v)", k, per[k], n, per)
		}
	}
}

// -static compiles a build without running it and reads its code with the same kinds; a map
// of another link (a different number of functions) is refused, never misapplied.
func TestStaticCountsNamesAndRefusesAForeignMap(t *testing.T) {
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("objdump (binutils) not installed")
	}
	dir := t.TempDir()
	wasmPath := filepath.Join(dir, "two.wasm")
	mapPath := filepath.Join(dir, "two.map")
	if err := os.WriteFile(wasmPath, twoFuncs, 0o644); err != nil {
		t.Fatal(err)
	}
	twoMap := "    Addr      Off     Size Out     In      Symbol\n" +
		"       -       1a       11 CODE\n" +
		"       -       1c        5         a.o:(one)\n" +
		"       -       1c        5                 one\n" +
		"       -       21        5         a.o:(two)\n" +
		"       -       21        5                 two\n"
	if err := os.WriteFile(mapPath, []byte(twoMap), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := staticCounts(config{linkMap: mapPath, static: wasmPath, fn: "two", out: dir}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "two.wasm: two, ") || !strings.Contains(out.String(), "bounds-check") {
		t.Fatalf("output:\n%s", out.String())
	}
	if err := staticCounts(config{linkMap: "testdata/guest.map", static: wasmPath, fn: "two", out: dir}, &out); err == nil {
		t.Fatal("a map naming 6 functions was applied to a module of 2")
	}
}
