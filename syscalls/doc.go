// Package syscalls is the only door from guest code to the world.
//
// It owns the declarative route table (name, argument and result JSON Schemas,
// required capability, approval class, side-effect class, provider, doc line), the
// router that enforces route lookup → argument validation → capability → approval →
// budget → provider → result validation → audit, the providers (clock, kv, tools), and
// the tape player that replaces every provider during validation.
//
// It must not dispatch model tool calls: tools.call reaches the engine only through
// an interface the engine hands down.
package syscalls
