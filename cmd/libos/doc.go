// Command libos is the single binary of Agent libOS: the MCP server, the CI validator,
// diagnostics, the operator commands and a demo. It contains no logic the library
// lacks: every decision about a tool call, an image, a candidate or an approval is the
// kernel's (engine), the JIT lifecycle's (tools) or the store's, and the commands only
// read flags, call the library and print what it answers. It is built on package libos
// (the module's root) as any embedder is: libos.Open for a store, libos.NewValidator for
// 'libos validate', System.MCPServer for 'libos serve', libos.Version for 'libos
// version'; it makes none of the parts itself.
//
// What it owns: the command line (cobra: help, examples and completion on every
// command, slog logs on stderr; MCP itself is served by the public package
// mcpserver, which embedders use the same way), the report formats of 'libos validate'
// (text, JSON, JUnit XML), the echo diagnostic as a model would run it
// (internal/diag), the demo script, the choice of the process 'libos serve' serves
// (the store's one live process of the image, else a new one), and the operator
// channel: a Unix socket in a directory private to the user (opsocket.go), on which a
// running 'libos serve' answers the kernel's operator calls (approvals, grants, process
// lists, event logs, and the host's cleanup: bindings, revoke-tool, pause, resume,
// kill, checkpoint, fork, candidate discard) for the other commands, since the store admits one process at a
// time.
//
// What it must not touch: arguments and results are never checked or reshaped here
// (the adapter sees every MCP tool call as a frame), and nothing is written to the
// store except through the kernel.
//
// Data: frames come from MCP clients (stdio or streamable HTTP) or from the command
// line, go to engine.Kernel.HandleFrame and the answers go back as MCP results;
// candidates come from files and go to the tools validator; processes, events,
// candidates and approvals come from the store in --data ($LIBOS_DATA, else the
// user's data directory) or from the server holding it. The sandbox's compilation
// cache lives in the user's cache directory.
package main
