package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero"
)

// staticCounts compiles a guest build with wazero (no instance, no run) and counts the
// instructions of one function by kind, in its dispatch block and in all: what a build
// change (the fuel instrumentation, a compiler flag) does to the code, without sampling.
// The link map must be of the same link (-map); the fuel instrumentation keeps the order
// of the functions, so the uninstrumented and instrumented guests of one build share it.
func staticCounts(cfg config, w io.Writer) error {
	names, err := readNames(cfg.linkMap)
	if err != nil {
		return err
	}
	guest, err := os.ReadFile(cfg.static)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "guestperf-static-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache))
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, guest); err != nil {
		return err
	}
	c, err := readCache(dir)
	if err != nil {
		return err
	}
	if len(c.offsets) != len(names) {
		return fmt.Errorf("the link map names %d functions, %s has %d", len(names), cfg.static, len(c.offsets))
	}
	name := cfg.fn
	if name == "" {
		name = "JS_CallInternal"
	}
	fn := -1
	for i, n := range names {
		if n == name {
			fn = i
		}
	}
	if fn < 0 {
		return fmt.Errorf("no guest function %q", name)
	}
	insns, err := disassemble(c, fn)
	if err != nil {
		return err
	}
	listing := filepath.Join(cfg.out, "static."+name+".txt")
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	if err := writeListing(listing, insns, 0); err != nil {
		return err
	}
	fmt.Fprintf(w, "listing in %s\n", listing)
	cls := classify(insns)
	block, jump := dispatchBlock(insns)
	all, inBlock := map[string]int{}, map[string]int{}
	n := 0
	for _, b := range block {
		if b {
			n++
		}
	}
	for i := range insns {
		all[cls[i]]++
		if block[i] {
			inBlock[cls[i]]++
		}
	}
	fmt.Fprintf(w, "%s: %s, %d bytes, %d instructions; dispatch block %d instructions (trap exits left out)\n", cfg.static, name, c.size(fn), len(insns), n)
	fmt.Fprintf(w, "  %-14s %8s %8s\n", "kind", "all", "block")
	for _, k := range []string{kindOther, kindSpill, kindReload, kindBounds, kindFuel, kindBrTable, kindTrapExit} {
		fmt.Fprintf(w, "  %-14s %8d %8d\n", k, all[k], inBlock[k])
	}
	if jump < 0 {
		fmt.Fprintln(w, "  no dispatch block: no indirect jump is reached from the function's main join")
		return nil
	}
	fmt.Fprintf(w, "  the dispatch block, up to the indirect jump at %x:\n", insns[jump].off)
	for i := range insns {
		if block[i] {
			fmt.Fprintf(w, "    %8x  %-14s %s\n", insns[i].off, cls[i], insns[i].text)
		}
	}
	return nil
}
