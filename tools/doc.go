// Package tools holds the built-in tools of a process, each a schema and a handler:
// echo, propose_jit_tool, validate_jit_tool, register_jit_tool and the Skill tools.
//
// Its handlers are called by the engine's pipeline and must not bypass it: they never
// write events or results themselves outside what the engine hands them.
package tools
