package main

import (
	"context"
	"fmt"
	"io"
	"os"

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
	cls := classify(insns)
	lo, hi := dispatchBlock(insns)
	all, block := map[string]int{}, map[string]int{}
	for i := range insns {
		all[cls[i]]++
		if i >= lo && i <= hi {
			block[cls[i]]++
		}
	}
	fmt.Fprintf(w, "%s: %s, %d bytes, %d instructions; dispatch block %d instructions\n", cfg.static, name, c.size(fn), len(insns), hi-lo+1)
	fmt.Fprintf(w, "  %-14s %8s %8s\n", "kind", "all", "block")
	for _, k := range []string{kindOther, kindSpill, kindReload, kindBounds, kindFuel, kindBrTable, kindTrapExit} {
		fmt.Fprintf(w, "  %-14s %8d %8d\n", k, all[k], block[k])
	}
	fmt.Fprintln(w, "  the dispatch block:")
	for i := lo; i <= hi; i++ {
		fmt.Fprintf(w, "    %8x  %-14s %s\n", insns[i].off, cls[i], insns[i].text)
	}
	return nil
}
