// Package fuel instruments a WebAssembly module so that every loop and every function call
// of it pays fuel, and calls the host when the fuel runs out.
//
// It owns the rewrite of the binary: a mutable i64 global exported as GlobalExport, an
// import ImportModule.ImportName of type (i64) → (i64), and in every function an i64
// local $f that holds the fuel while the function runs (a register where the global would
// be a load and a store at every check). The function loads $f from the global on entry
// and after every call, stores it before every call and on every way out (return, a
// branch to the function's label, its final end), and at its start and at the start of
// every loop body runs the check
//
//	local.get $f; i64.const cost; i64.sub; local.tee $f; i64.const 0; i64.lt_s
//	if  local.get $f; call $fuel; local.set $f  end
//
// where cost is the number of instructions of the straight-line run that follows (at least
// one): a lower bound on the work done before the next check. memory.copy and memory.fill
// first subtract their length >> BulkShift. A WebAssembly program can only run for long
// by branching back to a loop or by calling, so a guest that never calls the host still
// reaches it after a bounded amount of work; the host's answer is the next grant of fuel
// (or a trap). The count is a property of the code and its inputs alone, identical on
// every machine.
//
// It must not know what the host does with the poll, nor anything about QuickJS: it works
// on any module that uses the instructions it decodes (the MVP, sign extension, the
// saturating conversions and bulk memory). An instruction it does not know fails the
// rewrite instead of passing through unchecked.
//
// Data flow: wasm/guest/build.sh links the guest, runs the instrument command
// (./instrument) on it and commits the result; Check proves, on the embedded guest, that
// every function and every loop begins with the check.
package fuel
