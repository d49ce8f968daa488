// Package libos is the one entry point of Agent libOS for programs that embed it: a
// library operating system for LLM agents, in which a model drives a process only
// through tool calls that the libOS normalises, checks, runs and records durably, and
// in which models can write TypeScript tools that run in QuickJS compiled to
// WebAssembly under wazero.
//
// Open a System on a directory; it owns the store (Pebble), the sandbox with its
// compilation cache, the JIT tool lifecycle and the kernel, wired one way, and Close
// stops them in order. Through it: spawn, list, kill and fork processes; hand a model's
// tool call, in any provider's frame, to HandleFrame; call tools from the host
// (Runtime().Tools.Call); render a process's tool definitions for MCP, OpenAI or
// Anthropic (RenderTools); answer approvals, grant and revoke capabilities and read the
// audit log (the operator API); serve a process over MCP on any transport of the MCP Go
// SDK (ServeMCP, MCPServer). A Validator checks a JIT tool candidate exactly as
// validate_jit_tool does, without a store. Version names the build and the embedded
// sandbox guest.
//
// What it owns: only the wiring. Every decision belongs to the packages it wires:
// engine (the kernel), tools (built-in tools and the JIT lifecycle), wasm (the
// sandbox), store (durable state), syscalls (the routes) and mcpserver (MCP). The libos
// command is built on this package alone for everything it runs.
//
// What it must not do: hold logic of its own, or offer a second way to wire the parts.
//
// Data: frames and host calls go in through System to the kernel, which records them in
// the store under dir; candidates go in through Validator and come back as Reports;
// nothing else is written outside dir except, when Options.CacheDir is set, the
// compiled guest in that directory.
package libos
