// Package diag runs the protocol diagnostic of the tool-protocol-diagnostics Skill
// against a process, from the outside, the way a model would: it sends provider
// frames through the kernel's model path (HandleFrame) and reads the evidence back
// from the process's event log.
//
// What it owns: the sentinel (strings with escapes, 2^53+1, booleans, null, lists and
// nested objects with a nested "action"), the typed comparison of what echo returned
// with what was sent, the list of layers echo does not test, the optional JIT checks
// (a valid case and a schema-invalid case that must be rejected before execution), and
// the report 'libos diagnose' prints as text or JSON.
//
// What it must not touch: it never checks arguments or results itself (every decision
// about a call, normalisation, projection, schema, limits, is the kernel's, and the
// report only records what the kernel did), and it never writes to the store: the
// calls it sends are recorded by the kernel like any model call.
//
// Data: frames go to engine.Kernel.HandleFrame for one process; the answers come back
// from the kernel, and the evidence (tool_called events, their sequence numbers) is read
// from that process's event log in the store.Store the kernel runs on. The report goes
// back to the caller (cmd/libos), which prints it.
package diag
