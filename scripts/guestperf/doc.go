// Command guestperf profiles the sandbox guest's machine code to the instruction: where
// the cycles of a CPU-bound program go inside the code wazero generated for QuickJS, so
// that the wasm/native ratio of BENCHMARKS.md is explained by measurement, not by
// assumption. It is run by `make guest-profile`, never by `make test`, and needs perf
// (Debian's linux-perf) and the right to sample (root, or perf_event_paranoid ≤ 1).
//
// How a sample becomes a guest instruction, every step checked rather than assumed:
//   - A child process (this binary with -child) runs the program on the committed guest
//     through the public wasm package, with the benchmark's limits (fuel and a time
//     limit), in a loop, with wazero's compilation cache in a fresh directory.
//   - The cache entry gives the layout of the compiled guest (wazero 1.12's wazevo format:
//     one executable block, the offset of every local function in code-section order).
//     The child's executable anonymous mapping whose bytes equal that block, compared
//     through /proc/PID/mem, is where the code runs; perf samples the child
//     (cpu-clock: this VM has no hardware counters) and every sample inside the mapping
//     becomes a function and an offset.
//   - Function names come from wasm-ld's link map (--Map) of a build of the guest that
//     `make guest-profile` proves byte-identical to the committed one; the fuel
//     instrumentation keeps the order and number of local functions, and the number is
//     checked against the cache entry.
//   - The hottest function (or -func) is disassembled with GNU objdump and each
//     instruction is given a kind from the shapes wazero's amd64 backend emits
//     (classify.go): bounds check, trap exit, fuel check, br_table, spill, reload, other.
//     The dispatch block is the join most of the function's direct jumps go to and what is
//     reachable from it (both ways of a conditional jump, never a trap exit) up to the
//     first indirect jump.
//   - Per bytecode: the dispatch table (read from the guest's data segment at the address
//     the map gives) and the br_table that ends the dispatch block give each opcode's
//     handler; the function's control flow is walked from every handler, so a sample
//     belongs to the handler that reaches it (bytecodes.go). Opcodes are named from
//     QuickJS's quickjs-opcode.h.
//
// With -native it samples qjs-bench (`make native`, the same QuickJS sources compiled
// natively) on the same program and reads the same function with the native kinds
// (each handler's dispatch, frame loads and stores) and per bytecode (its dispatch table
// is filled by the PIE's relocations), so both builds can be compared.
//
// With -validate FILE the child validates that candidate file in a loop, as `libos
// validate` does (libos.NewValidator), instead of running -js: where a validation's
// guest time goes (the interpreter, the allocator, the prelude's checks), beside the Go
// side's samples, which are listed outside the guest.
//
// With -static it compiles a guest build with wazero without running it and counts the
// instructions of one function by kind and lists its dispatch block: how a build change
// (the fuel instrumentation, a compiler flag) changes the code.
//
// A timer sample lands on the instruction after the one that stalled (skid), so shares
// are read per block and per kind, not per instruction.
//
// It owns nothing the product uses and writes only under -out (build/guest-profile):
// perf.data, the cache entry, the mapping's address and the annotated listings.
package main
