// Package syscalls is the only door from guest code to the world.
//
// It owns the declarative route table (name, argument and result JSON Schemas,
// required capability, approval class, side-effect class, provider, doc line), the
// router that enforces route lookup → capability → argument size → approval →
// argument validation → policy → data flow → budget → provider → result validation →
// result size → audit, the providers (clock, kv, tools), and
// the tape player that replaces every provider during validation.
//
// It must not dispatch model tool calls: tools.call reaches the engine only through
// the ToolCaller the engine hands down. It knows nothing of QuickJS and does not import
// the sandbox: a Bound router and a Tape have the method set of wasm.Syscaller, and
// an *Error is the module's one error type (package liberr), which the sandbox turns
// into the guest's rejected Promise. So a kernel links no wazero.
//
// # The table
//
// Every route is declared once, in table.go, with declare(name, doc, reads|writes(cap,
// approval), argsSchema, resultSchema, provider). reads and writes are the only way to
// build a route's authority, so no route exists without a capability decision. Routes
// returns a copy for docs and `libos syscalls`; nothing reachable from a guest lists
// routes or schemas. An unknown route fails with one fixed unknown_syscall error.
// What the model reads of a route is made from the table too: Route.Signature and
// Route.Doc are the route list of an image's instructions (engine/image generates the
// default image's from them and fails on drift), and the Skills' routes, capabilities
// and example tapes are checked against the table (package tools' tests).
//
// A syscall's arguments are decoded once, where they cross the boundary: the audit
// record, the route's schema and policy stages, its provider (rawField splits the
// text along that decoding) and the journal all read the same decoding.
//
// # Production: Router
//
//	r, err := syscalls.NewRouter(syscalls.RouterConfig{Store: st})
//	pol, problems := syscalls.CompilePolicy(img.Policy()) // once per process
//	res, err := sandbox.Run(ctx, program, args, r.For(syscalls.Caller{
//		PID: pid, Tool: name, Capabilities: caps, Approver: approver,
//		Policy: pol, Tools: kernel, Depth: depth,
//	}), opts)
//
// The engine builds a Caller per tool call: the process's live CapabilitySet (CapSet is
// one the operator can change while calls run), its Approver (AutoApprove and AutoDeny
// are the policies; an operator-backed one blocks until a decision or ctx's end), the
// image's compiled route policy (every slot, below), the ToolCaller that runs
// tools.call through its full pipeline, and the current tools.call depth.
//
// Data: arguments come from the guest as JSON text and are decoded strictly (duplicate
// keys, invalid UTF-8 and excessive nesting are argument_invalid; numbers keep their
// exact text). kv lives in the calling process's key/value space in package store;
// budgets are store counters; every call — allowed or denied, with its stage, code and
// reason — is one "syscall" event in the process's hash-chained event log. Writes of
// kv.put and kv.delete are staged and committed in the same atomic batch as their audit
// event, so a write is never durable without its audit record and never acknowledged
// without it. If the event cannot be written the call fails with audit_failed.
//
// # Durability
//
// A syscall acknowledges nothing to the outside world: its result goes back to the
// guest, and only the tool call's settlement reaches the model. So for a Caller with
// Deferred set (the engine sets it for every tool call, whose tool_result or
// tool_failed is synced) budget charges, staged writes and audit events are written
// with store.UpdateDeferred, without a disk round trip; the settlement's sync makes
// them durable, since the store's log survives a crash as a prefix. After a crash
// either they are there, or nothing of the call after them is. A Caller without
// Deferred gets every syscall synced before it returns.
//
// The rule for providers: an effect inside the store needs nothing more, because it is
// later in the log than the tool_called that opened its call, so it cannot outlive it.
// A provider whose effect happens outside the store (the network, files, another
// system) must be declared external: the router then syncs the store before it runs,
// so a crash that the effect survives also keeps the call's tool_called, and the call
// is reported as unknown settlement instead of being forgotten. net.fetch is the
// table's external route (effect class external).
//
// # Route policy
//
// A route declares the typed slots of the image's policy it reads (PolicySlot), and
// CompilePolicy gives it no other: an image that fills a slot for a route that does not
// read it is refused. Each slot is one field of PolicySpec and one place in the image
// manifest (PolicySlot.Field); `libos syscalls` shows each route's slots and `libos
// images` what an image sets in them.
//
//   - approval (approvals.routes): raises a route, an area or a side-effect class (read,
//     write) to operator approval; it never lowers the table's class. Every route.
//   - budget (limits.syscall_budgets): the most calls ever, by BudgetAll ("syscalls"),
//     an area ("kv") or a route, charged before the provider runs and counted durably
//     in the store as "syscalls", "syscalls:kv", "syscalls:kv.put". Every route.
//   - size (limits.syscall_sizes): bounds in bytes on a route's arguments (as the code
//     sent them, stage args_size, before anyone is asked to approve them) and on its
//     result (as the provider returned it, stage result_size: the result is withheld
//     and the call's staged writes are not applied), by BudgetAll, an area or a route;
//     the tightest applies. Over a bound the call fails with limit_exceeded. Every
//     route but clock.now, whose arguments and result are small and fixed in shape.
//   - net, secrets, labels, data_flow: read by the route's own stages, both after the
//     arguments are checked and before any budget is charged: "policy" (net.fetch: the
//     URL parses strictly, its host, method and size are granted, every secret
//     placeholder may go there) and "data_flow" (the call's labels may reach this
//     sink).
//
// The engine compiles an image's whole policy once per process (CompilePolicy of
// image.Policy(), every problem at once, each at its JSON pointer in the manifest) and
// hands it down as Caller.Policy; nil raises nothing, bounds nothing and refuses every
// fetch.
//
// net.fetch resolves the host once, keeps only public addresses and the non-public
// ones the image names exactly, and connects to one of those very addresses (no
// second resolution, no proxy); each redirect is checked like the first URL. Secret
// values are read on the host when a header is sent and replaced by their
// placeholder in anything the guest gets back. The audit event keeps method, host,
// path, status, sizes, the address and the names of the secrets sent, never bodies,
// header values or secret values.
//
// Data flow: taint is per call (see dataflow.go). Results of labelled sources (kv
// patterns, fetch hosts, stored labels of kv values) add their labels to the call's
// taint; sinks (net.fetch per host, kv.put into a key without the label, tools.call
// into an external tool, the result to the model: Bound.CheckResult) refuse the labels
// the image's rules forbid, with data_flow_denied naming the label and the sink.
//
// # The path of one tool call
//
// The router is step 5 of 6 (package libos lists the steps): the sandbox hands a JIT
// tool's syscall to the Bound the tool's handler made (Router.For with the Caller the
// kernel put on the call), and the route's provider writes through package store,
// with the audit event, in one batch. Only the Caller's interfaces lead back up: its
// Approver for an operator-class route, its Tools for tools.call.
//
// # Validation: Tape
//
// NewTape(entries) (or ParseTape for the JIT authoring Skill's JSON) replays ordered mocks. No
// provider, capability, approval or budget is consulted. A call whose name or
// arguments (compared by JSON value) differ from the next entry, or that comes when no
// entry is left, rejects with tape_mismatch and fails the test for good, even if the
// guest catches the rejection. A call to an unknown route, or with arguments the route's
// schema refuses, fails the test the same way (production would refuse it). Finish
// reports that failure, or else leftover entries (tape_leftover). When judging a test,
// a mismatch outranks the run's own error, which it usually caused; leftovers count
// when the run itself succeeded.
//
// NewTape holds an entry of a known route to what production could answer (its args
// and result to the route's schemas, its error code to RouteErrorCodes) and refuses
// any other with tape_invalid whose Details name the field ("/1/result").
//
// An ok:false entry rejects with its error verbatim: {code, layer, message} as given,
// which the guest reads as "layer: message" (the message alone without a layer); a
// string is the message, and also the code when it looks like one
// ("capability_denied"), provider_failed otherwise. An exported tape carries the
// layer as a field; one exported before it did holds the whole text in its message.
package syscalls
