// Package mcpserver serves one libOS process over the Model Context Protocol with the
// official Go SDK. It is public so that a program embedding the libOS serves MCP exactly
// as the libos command does: the command holds no MCP logic of its own.
//
// What it owns: only the translation between MCP and the kernel. tools/list is the
// process's projection as the engine renders it for MCP; tools/call hands the call to
// the engine's adapter and pipeline as a frame; results and errors are mapped to MCP's
// shapes (structuredContent and text content; isError results with the typed error
// under _meta["libos/error"]; JSON-RPC errors for protocol-frame failures and for
// failures of the server itself). Every JSON-RPC error the server answers with, its
// own or the SDK's, has a JSON-RPC code and data that is JSON (wireerr.go), so that
// no answer is left unwritten and no session ends on one.
//
// What it must not touch: it never checks, validates or reshapes arguments, and never
// writes to the store. The adapter sees every call, including names the SDK would not
// know (hidden JIT names, names with surrounding white space, a missing name with a
// legacy action), so that every decision about a call is the kernel's and reaches the
// audit log.
//
// Data: JSON-RPC messages arrive on the stdio transport (Stdio, one message per line),
// the streamable HTTP handler (Handler, one per POST) or any other transport of the SDK
// through Wrap. Each is parsed exactly once
// before the SDK sees it (gate.go): one exact JSON object and nothing after it, JSON-RPC
// members only and in their exact case, no duplicate key, ids the SDK carries exactly,
// params that are objects, and tools/call params of exactly name, arguments and _meta.
// A message that fails is never dispatched: the client gets a JSON-RPC error with
// data.code protocol_frame, the process's log a protocol_rejected event
// (engine.Kernel.RejectFrame), and a stdio session reads on. The SDK decodes the rest;
// a receiving middleware takes every tools/call before the SDK's own lookup and builds
// the frame {"name", "arguments"} from the name and the raw, undecoded arguments bytes,
// for engine.Kernel.HandleFrame. A session ends only when every tools/call passed to the
// SDK has been answered (stdio), or after the POSTs in flight (Wait).
// The SDK's tool registry is a mirror of the projection, refreshed when the kernel
// reports a change (engine.Kernel.OnToolsChanged), so the SDK answers tools/list from
// it and sends notifications/tools/list_changed.
//
// Authorization (auth.go, oauth.go): with Options.Auth, the HTTP handler admits only
// requests whose bearer token (a static token of a token file, stored hashed, or a JWT
// access token of one OAuth issuer, checked against its JWKS) has a scope covering the
// served process; others get 401 or 403 with RFC 6750 challenges naming the RFC 9728
// metadata (MetadataHandler). It reads tokens from the Authorization header and keys
// from the issuer; it writes refusals to the logger and accounts for every access
// decision in the process's audit log (engine.Kernel.RecordAccess; refusals of known
// principals one by one, the others counted), never a token. CheckExposure is the rule that an HTTP server beyond loopback needs
// authentication and TLS.
//
// Approvals through the client (approval.go), resources, prompts and the Skills
// extension (resources.go), completions (completion.go), progress of a call (engine.WithProgress) and the
// cancellation of stateless calls (http.go) are described where they are made.
//
// # The path of one tool call
//
// This package is step 1 of 6 (package libos lists the steps): a tools/call frame,
// parsed once and exactly, goes to engine.Kernel.HandleFrame, and its Result comes
// back as the answer. Nothing below calls into this package during the call.
package mcpserver
