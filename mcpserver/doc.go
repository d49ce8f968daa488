// Package mcpserver serves one libOS process over the Model Context Protocol with the
// official Go SDK. It is public so that a program embedding the libOS serves MCP exactly
// as the libos command does: the command holds no MCP logic of its own.
//
// What it owns: only the translation between MCP and the kernel. tools/list is the
// process's projection as the engine renders it for MCP; tools/call hands the call to
// the engine's adapter and pipeline as a frame; results and errors are mapped to MCP's
// shapes (structuredContent and text content; isError results with the typed error
// under _meta["libos/error"]; JSON-RPC errors for protocol-frame failures and for
// failures of the server itself).
//
// What it must not touch: it never checks, validates or reshapes arguments, and never
// writes to the store. The adapter sees every call, including names the SDK would not
// know (hidden JIT names, names with surrounding white space, a missing name with a
// legacy action), so that every decision about a call is the kernel's and reaches the
// audit log.
//
// Data: JSON-RPC messages arrive on the stdio transport (Transport), the streamable
// HTTP handler (Handler) or any other transport of the SDK through Wrap, which look at
// each tools/call before the SDK decodes it:
// params with a key other than name, arguments and _meta, or a key twice, would lose
// those keys in the SDK's decoding, so they are passed on raw and become the frame
// {"method":"tools/call","params":<params as sent>}, which the adapter refuses
// (protocol_frame, recorded as protocol_rejected). The SDK decodes the rest; a
// receiving middleware takes every tools/call before the SDK's own lookup and builds
// the frame {"name", "arguments"} from the name and the raw, undecoded arguments bytes,
// for engine.Kernel.HandleFrame.
// The SDK's tool registry is a mirror of the projection, refreshed when the kernel
// reports a change (engine.Kernel.OnToolsChanged), so the SDK answers tools/list from
// it and sends notifications/tools/list_changed.
package mcpserver
