package liberr

import (
	"slices"
	"strings"
)

// Entry is one code of the registry: every code a model, an MCP client or an operator
// can see is one entry, and ERRORS.md is generated from the list.
type Entry struct {
	Code Code
	// Layers are the packages that emit the code, by their path in the module.
	Layers []string
	// Meaning says when the code is returned, for people reading ERRORS.md.
	Meaning string
}

type registered struct{ code, layers, meaning string }

// registry is the one list of codes, sorted by code. A package that adds a code adds
// it here too: TestRegistryCoversEveryCode fails on a code emitted anywhere in the
// module that is missing, or registered without its layer, and TestErrorsDoc on an
// ERRORS.md that does not match (regenerate it with
// go test ./liberr -run TestErrorsDoc -update).
var registry = []registered{
	{"address_not_allowed", "syscalls", "The host resolves only to addresses that are not public (loopback, private, link-local, CGNAT, metadata, …) and that the image does not name exactly."},
	{"agent_not_resumable", "agent", "A provider-loop run cannot be resumed exactly: it finished, it is unknown, it talks to another provider, or a message of it was stored as a digest only."},
	{"already_registered", "tools", "register_jit_tool on a candidate already registered."},
	{"already_settled", "tools", "validate_jit_tool on a candidate that was already validated (or rejected, or registered); the recorded result stands and nothing is re-run."},
	{"ambient_clock", "wasm", "The program called Date.now(), Date() or new Date() without an argument. The sandbox has no ambient clock: the time comes from the clock.now syscall, which the caller's Syscaller checks and records."},
	{"approval_denied", "engine syscalls", "The operator denied the call, no approver is available, or the approval found does not apply to it (other arguments, another tool definition)."},
	{"approval_required", "engine", "The call needs an approval its client was asked for (an MCP input_required result); the client answers by retrying the call with the decision. The approval stays pending, and the operator can decide it too."},
	{"approval_timeout", "engine syscalls", "No operator decision arrived before the deadline; a timeout denies."},
	{"args_invalid", "wasm", "The arguments are not exact JSON (invalid UTF-8, a lone surrogate escape, a repeated key, nesting too deep) or not a JSON object; the program did not run."},
	{"argument_invalid", "syscalls", "The arguments do not match the route's argument schema, or a bound the schema cannot express (byte sizes, time zone names, cursors)."},
	{"audit_failed", "syscalls", "The decision could not be recorded; nothing unaudited is acknowledged, so the call fails."},
	{"auth_required", "mcpserver", "An HTTP request to an MCP server that requires authorization carries no bearer token (HTTP 401, with a WWW-Authenticate challenge naming the resource metadata)."},
	{"auth_unavailable", "mcpserver", "The keys of the configured OAuth issuer could not be fetched, so no access token can be checked now (HTTP 503)."},
	{"batch_too_large", "cluster", "In the replicated mode, a write batch is larger than one message of the stream holds; it was refused before anything was acknowledged."},
	{"budget_exceeded", "engine syscalls", "A durable budget of the process is spent: its tool-call budget or a syscall budget."},
	{"cache_unusable", ". wasm", "The compilation cache directory (libos.Options.CacheDir, wasm.Config.CacheDir, libos.WarmCache) cannot be created or written when the sandbox guest is compiled: in libos.Open, libos.NewValidator, libos.WarmCache or wasm.NewEngine, or with a lazy sandbox at its first call. With an OnCacheUnusable callback the guest is compiled in memory instead and the callback is given this error once; without one the compile fails with it."},
	{"call_not_found", "tools", "The process has no tool call with that ID."},
	{"call_unsettled", "tools", "The call has no settlement (it is open, or it was settled as unknown after a crash): there is no result to expect."},
	{"canceled", "agent engine store wasm", "The caller's context was done (cancelled, or its deadline passed) before the work finished."},
	{"candidate_discarded", "tools", "validate_jit_tool or register_jit_tool on a candidate the operator discarded; it keeps its record and can never be validated or registered."},
	{"candidate_rejected", "tools", "register_jit_tool on a candidate whose validation failed."},
	{"capability_denied", "syscalls", "The calling process does not hold the route's capability."},
	{"closed", "store", "The store is closed."},
	{"conflict", "store", "The write collides with an existing record (duplicate binding name, duplicate candidate ID, a call ID that is already open, …)."},
	{"corrupt", "store", "A stored record cannot be decoded or the event chain does not verify."},
	{"cross_process_batch", "cluster", "In the replicated mode, one write batch writes two processes that both exist: one message of the stream cannot compare-and-set two process logs, so it was refused before anything was acknowledged."},
	{"data_flow_denied", "syscalls", "A value carrying a label would reach a sink the image's data-flow rules forbid for it."},
	{"default_export_forbidden", "jsbundle", "The candidate's module has a default export; a tool exports only run."},
	{"diagnostics_truncated", "tools", "Ends a list of diagnostics that reached its bound."},
	{"dynamic_import_forbidden", "jsbundle", "The source calls import(); a tool has no modules to load."},
	{"eval_forbidden", "jsbundle", "The source calls eval; a tool's code is all in its source."},
	{"expected_mismatch", "tools", "The value returned is not exactly (as JSON) expected."},
	{"export_assignment_forbidden", "jsbundle", "The source uses TypeScript's export = form."},
	{"export_forbidden", "tools", "The call saw labelled data that the image's data-flow rules forbid exporting."},
	{"extra_export", "jsbundle", "The module exports something besides run."},
	{"fetch_failed", "syscalls", "The connection or the HTTP exchange failed."},
	{"fetch_timeout", "syscalls", "No complete response within the fetch's time limit (the image's timeout or the call's own)."},
	{"format_unsupported", "store", "The directory was written by a newer (or unknown) layout."},
	{"function_constructor_forbidden", "jsbundle", "The source builds a function from text (Function, new Function)."},
	{"global_access_forbidden", "jsbundle", "The source reads globalThis, self or window (other than .name)."},
	{"global_forbidden", "jsbundle", "The source names a host global the sandbox does not have (Deno, WebAssembly, process)."},
	{"host_not_allowed", "syscalls", "The image grants no egress to the host (or to a redirect's host), or no egress at all."},
	{"import_equals_forbidden", "jsbundle", "The source uses TypeScript's import x = require(...) form."},
	{"import_forbidden", "jsbundle", "The source has an import declaration; a tool has no modules to load."},
	{"import_meta_forbidden", "jsbundle", "The source reads import.meta."},
	{"in_use", "store", "Another process holds the store directory."},
	{"insecure_listener", "mcpserver", "An MCP server over HTTP on an address beyond loopback without both authentication and TLS; bind 127.0.0.1, configure them, or pass --insecure."},
	{"internal_error", "jsbundle", "The compiler failed on its own; the candidate is not at fault and is rejected."},
	{"invalid", "store", "The caller passed a malformed argument (bad ID, bad JSON, …)."},
	{"invalid_batch", "cluster", "In the replicated mode, a message on the process subjects is not a batch of the process its subject names (headers missing or malformed, another process's identity, a chain position that is not its subject's previous message, writes the store cannot read, a subject of no process): every host refuses it alike, applies nothing of it and goes on with the next message."},
	{"invalid_config", ". agent cluster engine engine/render mcpserver", "A Spawn or Open configuration is unusable, or the authorization of the MCP server over HTTP is (a token file, an OAuth issuer or audience)."},
	{"invalid_image", "engine engine/image", "An image manifest (or one of its Skills) is unusable; the error's Details list every problem at once."},
	{"invalid_name", "tools", "The name does not match ^[A-Za-z0-9_-]{1,64}$."},
	{"invalid_request", "cmd/libos tools", "The arguments are not the tool's exact shape (an unknown or missing field, a wrong type). propose_jit_tool has no capability-request field."},
	{"invalid_schema", "tools", "A declared schema is not exact JSON, does not compile as JSON Schema 2020-12, refers to a remote $ref, or (input schema) does not declare an object root."},
	{"invalid_skill", "engine engine/image", "A SKILL.md document is unusable; Details list every problem."},
	{"invalid_state", "engine", "The operation does not apply in the current state (a decided approval decided again, a killed process resumed)."},
	{"invalid_test", "tools", "A test is not {args, expected, syscalls} with tape entries of the documented form."},
	{"invalid_tool", "engine", "A tool definition is unusable (bad name, schema that does not compile, missing handler)."},
	{"io", "store", "The file system failed; nothing in the failed operation was acknowledged."},
	{"journal_corrupt", "tools", "The process's event log does not verify (an event edited, removed, reordered or taken from another log), or the call's journal, stored result or code does not match the digests its hash-chained events carry; nothing of it is exported or replayed."},
	{"journal_truncated", "tools", "An entry of the call's journal was over its bound and keeps only digests."},
	{"js_error", "wasm", "Run threw, or the Promise it returned rejected."},
	{"kernel_closed", "engine", "The kernel is closed."},
	{"lease_lost", "cluster", "In the replicated mode, this host does not hold the process's lease, or another host appended to its log since this host's last write: the write was refused, nothing of it was acknowledged, and this host stops serving the process."},
	{"limit_exceeded", "engine store syscalls tools wasm", "A bound was hit: an argument, result or proposal part over its size, the sandbox's wall time, memory, stack, output, logs or syscall count (the error names which), the tools.call depth, or a store budget counter."},
	{"method_not_allowed", "syscalls", "The image does not allow the fetch's HTTP method."},
	{"name_conflict", "tools", "The name is already a tool of the process (built-in or registered JIT) or already bound in it. There are no replacement semantics."},
	{"no_tool_call", "cmd/libos/internal/diag", "On the provider path of the diagnostic, the model answered without making the tool call it was asked for."},
	{"not_found", "engine store tools", "The named thing does not exist for the caller: a checkpoint, approval, binding, record, or a candidate of another process (the same answer as a missing one)."},
	{"not_jit_tool", "tools", "The call is of a built-in tool, whose code is not in the store."},
	{"not_json", "wasm", "The value run returned is not plain JSON; Path names the first offender."},
	{"not_replayable", "tools", "The call cannot be expressed as a tape: it has no journal (it predates it), a syscall of it was refused before routing (a tape cannot say that), or its tool's code is no longer in the store."},
	{"number_inexact", "wasm", "A number in the arguments, or in a syscall result, that a JavaScript number (a double) cannot hold exactly; the error names its JSON Pointer. It is refused before the program sees it, never rounded."},
	{"operator_socket_unsafe", "cmd/libos", "The operator socket or its directory is not the user's own with mode 0700; nothing is sent to it and no server listens on it."},
	{"output_invalid", "engine", "The handler returned something that is not exact JSON or that does not satisfy the tool's output schema."},
	{"process_paused", "engine", "The process is paused; the operator resumes it."},
	{"protocol_frame", "engine", "The provider frame could not be normalised (malformed JSON, non-object arguments, no usable function name, duplicate or case-variant keys, invalid UTF-8, nesting too deep). Nothing was dispatched; the audit log has a protocol_rejected event, never tool_called."},
	{"provider_auth", "agent", "The model API refused the credentials (HTTP 401 or 403)."},
	{"provider_bad_response", "agent", "The model API answered with something the loop cannot use (no choice, a tool call of an unknown type, a stream cut before its end, a success status with a body that cannot be read, a body over MaxResponseBytes, a redirect, which is not followed)."},
	{"provider_failed", "syscalls", "The provider failed, or returned a result that does not match the route's result schema."},
	{"provider_rate_limited", "agent", "The model API answered 429 on every attempt the retry bound allowed, or asked for a wait (Retry-After) over a minute or past the request's timeout."},
	{"provider_refused", "agent", "The model refused to answer (a refusal or a content filter)."},
	{"provider_rejected", "agent", "The model API refused the request itself (an HTTP 4xx other than 401, 403 and 429)."},
	{"provider_timeout", "agent", "The model request did not finish within its timeout."},
	{"provider_unavailable", "agent", "The model API answered 5xx past the retry bound (or before a wait it asked for that the timeout leaves no room for), or could not be reached."},
	{"read_only", "store", "A write on a store opened read-only (the libos command's read-only commands, libos.Options.ReadOnly): nothing was written."},
	{"reexport_forbidden", "jsbundle", "The source re-exports from another module."},
	{"reference_directive_forbidden", "jsbundle", "The source has a /// <reference> directive."},
	{"replay_different", "cmd/libos", "A replayed call's code gave another result than the recorded one (`libos replay`, `libos validate` with tapes); the diff is reported."},
	{"replication_failed", "cluster", "In the replicated mode, the stream did not acknowledge the write (unreachable, no quorum, timeout): nothing was acknowledged; the batch may still appear in the log later, whole."},
	{"request_state_invalid", "engine", "A client's answer to an approval cannot be taken: its requestState fails authentication (tampered, or from another server's store), names another process, or is bound to another call, arguments or tool definition, or the approval was already decided (a replay)."},
	{"request_too_large", "syscalls", "A fetch's body is larger than the image allows."},
	{"require_forbidden", "jsbundle", "The source calls require."},
	{"reserved_name", "tools", "The name is run_jit_tool, the multiplexed pseudo-function."},
	{"response_too_large", "syscalls", "A response's body is larger than the image allows."},
	{"run_export_invalid", "jsbundle", "Run is exported but is not a function."},
	{"run_export_missing", "jsbundle", "The module does not export a function run."},
	{"run_missing", "wasm", "The program defines no function run."},
	{"run_params", "jsbundle", "A warning: run takes more than (args, libos)."},
	{"schema_invalid", "engine", "The arguments do not satisfy the tool's input schema."},
	{"scope_denied", "mcpserver", "The bearer token is valid but its scope does not cover the served process (HTTP 403, insufficient_scope)."},
	{"secret_not_allowed", "syscalls", "A header names a secret the image does not declare, or one that may not go to the fetch's host; or a placeholder is outside header values; or the secret would travel in clear text (plain http to an address that is not loopback, or a redirect from https to http)."},
	{"secret_unavailable", "syscalls", "A declared secret has no usable value on the host."},
	{"source_too_complex", "jsbundle", "The source nests deeper, or has more tokens, than the compiler's bounds."},
	{"source_too_large", "jsbundle", "The source is larger than its bound."},
	{"storage_failed", "agent engine tools", "The durable store refused a read or write; nothing was acknowledged."},
	{"syntax_error", "jsbundle wasm", "The program does not parse (at the static checks, or in the sandbox)."},
	{"syscall_args_invalid", "wasm", "The guest passed arguments that are not JSON."},
	{"syscall_failed", "wasm", "A syscall failed inside the host in a way the guest may not learn about; the guest sees only this code."},
	{"tape_invalid", "syscalls", "A tape entry is malformed."},
	{"tape_leftover", "syscalls", "Under a tape, entries were left unconsumed when the run ended."},
	{"tape_mismatch", "syscalls", "Under a tape, the call did not match the next entry (name, arguments, or there was no entry left)."},
	{"token_audience", "mcpserver", "The access token's aud does not name this MCP server's resource URI (RFC 8707) (HTTP 401)."},
	{"token_expired", "mcpserver", "The access token's exp has passed (HTTP 401)."},
	{"token_invalid", "mcpserver", "The bearer token is not one the server accepts: no such static token, or a JWT that does not parse, is not signed by a key of the issuer, uses an algorithm not accepted, has no exp or is not valid yet (HTTP 401)."},
	{"token_issuer", "mcpserver", "The access token's iss is not the configured OAuth issuer (HTTP 401)."},
	{"too_many_redirects", "syscalls", "A fetch was redirected more often than the image allows."},
	{"tool_conflict", "engine", "Installing a tool whose name is already in the process table, or removing one that is not there."},
	{"tool_failed", "cmd/libos cmd/libos/internal/diag engine mcpserver tools", "A tool's handler (or a JIT tool's program) failed without a code of its own; the CLI and the MCP server also report it for a failure that carries no code."},
	{"tool_not_allowed", "engine", "The tool is in the process table but the visibility gate (the process's allowed-tool set) refuses it."},
	{"transpile_warning", "jsbundle", "A warning of the TypeScript compiler, kept as a diagnostic."},
	{"trap", "wasm", "The instance trapped; it was discarded and the engine stays usable."},
	{"unknown_process", "engine", "No live process has that PID."},
	{"unknown_settlement", "agent", "Told to the model on a resumed provider-loop run: the tool call was dispatched before the host stopped and its outcome was never recorded; it is not sent again."},
	{"unknown_skill", "engine", "The image ships no Skill of that name."},
	{"unknown_syscall", "syscalls wasm", "The route does not exist, or the sandbox cannot route the name. The message is fixed and reveals nothing about which routes exist."},
	{"unknown_tool", "engine", "The name is not in the process's projection (unknown, hidden, a JIT name called directly in multiplexed mode, run_jit_tool in direct mode or through the host API)."},
	{"unsettled", "wasm", "Run returned a Promise that never settled."},
	{"unsupported_syntax", "jsbundle", "Valid TypeScript that the compiler cannot lower to ES2020."},
	{"url_invalid", "syscalls", "A fetch URL (or a redirect's location) does not pass the strict parse: not http(s), user information, an address in an unusual form, a malformed host or port."},
	{"validation_failed", "tools", "register_jit_tool auto-validated a proposed candidate and the validation failed; the candidate is now rejected and its diagnostics are kept."},
}

// Registry returns every registered code, sorted by code.
func Registry() []Entry {
	out := make([]Entry, len(registry))
	for i, r := range registry {
		out[i] = r.entry()
	}
	return out
}

// Lookup returns the entry of code.
func Lookup(code Code) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(registry, string(code), func(r registered, c string) int {
		return strings.Compare(r.code, c)
	})
	if !ok {
		return Entry{}, false
	}
	return registry[i].entry(), true
}

func (r registered) entry() Entry {
	return Entry{Code: Code(r.code), Layers: strings.Fields(r.layers), Meaning: r.meaning}
}
