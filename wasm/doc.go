// Package wasm is the sandbox: QuickJS compiled to WebAssembly, run under wazero.
//
// It owns the guest (the C shim, our patches to QuickJS, the build), and the Go host:
// the compiled module and its on-disk compilation cache, the instance pool, per-call
// limits (time, memory, stack, output, logs, syscalls), determinism (clock and seed
// supplied by the caller) and the "libos" host imports through which the guest reaches
// a Syscaller.
//
// It must not know about tools, processes or capabilities: a Syscaller is handed in by
// the caller (the syscall router in production, a tape during validation). Only JSON
// crosses the guest boundary, in both directions.
package wasm
