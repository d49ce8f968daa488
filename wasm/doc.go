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
//
// Data flow: the caller (engine, or the validator in tools) hands Engine.Run a program
// (JavaScript from jsbundle that defines run), its JSON arguments, a Syscaller and
// Options (limits, clock, seed). The program runs on a pooled instance, in a JavaScript
// runtime and context that no earlier call touched: the Engine snapshots the guest's
// memory once the prelude is installed, makes every instance from that snapshot and
// restores it after every call (or, when the caller takes it with Options.Defer, in
// the background once the caller starts it, the instance out of the pool until then).
// The program is compiled once per Engine to QuickJS
// bytecode, which every later call of the same program runs from (program.go); the
// bytecode stays in host memory. Each libos.syscall goes out through the Syscaller and its
// JSON result comes back into the guest. Run returns the JSON value byte for byte as the
// guest wrote it, the console lines and stats, or an *Error with a stable code. Nothing
// of a call is persisted here (recording what ran is the caller's job); with a cache
// directory, besides wazero's compiled guest, the Engine keeps there the snapshot of the
// prepared state for the next process, keyed and checksummed (snapfile.go). The cache
// directory is touched only from the compile of the guest on: a lazy Engine that runs
// no call neither creates nor probes nor opens it, and one that finds it unusable
// compiles in memory when its caller asked to be told (Config.OnCacheUnusable).
//
// The host survives every guest failure: a trap, a hard memory cap, a panic in a host
// function or in the Syscaller end only that call (and discard its instance); the next
// call on the Engine runs normally. The guest ABI is specified in guest/ABI.md.
//
// Every loop and function of the guest pays fuel (internal/fuel rewrites the linked
// module; guest/ABI.md, "Fuel"): when a grant runs out the guest calls the host, which
// checks the wall time, the caller's cancellation and Limits.Fuel. So every call reaches
// the host, and its goroutine a Go safe point, about every millisecond whatever the guest
// runs: a garbage collection's stop-the-world never waits for a guest, and the limits
// hold in every built-in. Limits.Fuel is a budget counted in guest work, identical on
// every machine: validation uses it so that a verdict never depends on load.
//
// # The path of one tool call
//
// The sandbox is step 4 of 6 (package libos lists the steps): the JIT handler (package
// tools) hands Run the program, the arguments and the router bound to the call (a
// syscalls.Bound, seen here only as a Syscaller); each libos.syscall crosses the guest
// boundary as JSON and goes to it, and this package calls nothing else of the module.
//
// internal/linmem backs each instance's linear memory with address space reserved for the
// whole cap, so that growing it never copies it.
package wasm
