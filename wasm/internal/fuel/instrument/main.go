package main

import (
	"fmt"
	"os"

	"github.com/agentlibos/libos/wasm/internal/fuel"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: instrument IN.wasm OUT.wasm")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "instrument:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	mod, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	inst, err := fuel.Instrument(mod)
	if err != nil {
		return err
	}
	cov, err := fuel.Check(inst)
	if err != nil {
		return fmt.Errorf("the instrumented module fails its own check: %w", err)
	}
	if err := os.WriteFile(out, inst, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "instrument: %d functions and %d loops check their fuel, %d bulk memory instructions pay for their length (%d → %d bytes)\n",
		cov.Functions, cov.Loops, cov.Bulk, len(mod), len(inst))
	return nil
}
