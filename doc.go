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
//
// # The path of one tool call
//
// One MCP tools/call, from the frame to Pebble, in DESIGN's order. Each package is
// entered once, going down, and calls only the ones after it; the stack of every write
// a call makes is held to this list by TestCallPathMCPToPebble:
//
//  1. mcpserver: the transport reads the message and parses it once, exactly
//     (internal/jsonexact), refusing a bad frame as protocol_frame before the SDK sees
//     it; the tools/call goes to the kernel as a frame (engine.Kernel.HandleFrame).
//  2. engine: the adapter normalises the frame and decodes the arguments, once; then
//     the named stages of dispatch: lookup (projection), argument size, input schema,
//     the visibility and Skill gates, approval; open (budget and tool_called); the
//     handler; settle (result size, output schema, normalisation, tool_result or
//     tool_failed). Before the handler runs the kernel puts on the Call, as plain
//     values, all the handler needs: the arguments (Call.Args, decoded as Call.Value)
//     and the call's syscall authority (Call.Syscalls, a syscalls.Caller). A built-in
//     tool such as echo ends here: the call's writes are the kernel's own (engine →
//     store).
//  3. tools: the JIT handler binds the router to that authority (syscalls.Router.For)
//     and runs the registered program in the sandbox; it calls nothing of the kernel.
//  4. wasm: the program runs in QuickJS; each libos.syscall crosses the guest boundary
//     as JSON and goes straight to the bound router (a wasm.Syscaller).
//  5. syscalls: the router takes the syscall through route, capability, approval,
//     arguments, budget, provider and result, and commits the provider's write with its
//     audit event.
//  6. store: every write above is one Pebble batch (store.Update, UpdateDeferred); the
//     hash-chained log is the record of the call.
//
// Each result goes back up the same way. Leaf packages that call nothing of the module
// (internal/jsonexact, liberr) serve every step and are not steps. Two interfaces the
// kernel hands down are called back only off this path: its approver, for a route the
// image makes operator-class, and its host tools, for a tools.call syscall, which is a
// new tool call of its own and starts again at step 2.
package libos
