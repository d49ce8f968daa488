// Package fuel instruments a WebAssembly module so that every loop and every function call
// of it pays fuel, and calls the host when the fuel runs out.
//
// It owns the rewrite of the binary: a mutable i64 global exported as GlobalExport, an
// import ImportModule.ImportName of type (i64) → i64, and at the start of every function
// body and of every loop body the sequence
//
//	global.get $fuel; i64.const cost; i64.sub; global.set $fuel
//	global.get $fuel; i64.const 0; i64.lt_s
//	if  global.get $fuel; call $fuel; global.set $fuel  end
//
// where cost is the number of instructions of the straight-line run that follows (at least
// one): a lower bound on the work done before the next check. A WebAssembly program can
// only run for long by branching back to a loop or by calling, so a guest that never calls
// the host still reaches it after a bounded amount of work; the host's answer is the next
// grant of fuel (or a trap). The count is a property of the code and its inputs alone,
// identical on every machine.
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
