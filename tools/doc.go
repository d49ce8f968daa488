// Package tools holds the built-in tools of a process, each a schema and a handler:
// echo, propose_jit_tool, validate_jit_tool, register_jit_tool and the Skill tools.
//
// Its handlers are called by the engine's pipeline and must not bypass it: they never
// write events or results themselves outside what the engine hands them. Each
// constructor (Echo, …) returns an engine.Tool that an embedder passes to
// engine.Open in Config.Builtins; a process enables it by name at Spawn.
//
// Data comes in as an engine.Call (exact, normalised arguments) and leaves as the
// handler's JSON result, which the engine checks, normalises and persists. Echo, the
// transport diagnostic, returns its arguments unchanged and touches nothing else.
package tools
