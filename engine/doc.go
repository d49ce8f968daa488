// Package engine is the kernel of Agent libOS: every model tool call passes through it.
//
// It owns the Kernel (open, close, rehydrate), processes and their tool tables, the
// tool-call adapter that normalises provider frames, the projections (direct and
// multiplexed), the dispatch pipeline, limits and budgets, result normalisation and
// the events of a call; the process lifecycle (grant/revoke, projection, pause/kill,
// checkpoint and fork, rehydrate), the Skill gate and activations, operator
// approvals, and the operator API. What is pure and needs none of the kernel's locks
// lives in its subpackages: engine/image parses and checks images and Skills,
// engine/render writes a projection for MCP, OpenAI and Anthropic.
//
// It must not know about QuickJS, esbuild or Pebble keys: the sandbox is reached
// through handlers (package tools builds them, JIT tools come through InstallTool),
// programs through package jsbundle, durable state through package store's typed API
// (records, atomic Update batches, the hash-chained event log). It never imports
// package tools: tools import engine's types.
//
// # The path of one tool call
//
// The kernel is step 2 of 6 (package libos lists the steps), between the MCP server
// (or an embedder) above and the handler, the sandbox, the router and the store below.
// Before the handler runs it hands the Call everything the handler needs, as plain
// values: the arguments (Call.Args and Call.Value) and the syscall authority
// (Call.Syscalls). A handler on its way to a syscall calls nothing of the kernel. Only two interfaces it hands down come
// back up: the approver (routeApprover) for an operator-class route, and the host tools
// (Runtime().Tools) for a tools.call syscall, a new call that enters at this step again.
//
// # Where data comes from and goes
//
// A frame arrives through HandleFrame (from the model, via the MCP server or an
// embedder) or arguments through Runtime().Tools.Call (from the host, or a tools.call
// syscall). It leaves as a Result, with its evidence in the store:
//
//	adapter ─ projection/lookup ─ argument size ─ input schema ─ visibility gate ─ budget
//	  │            │                   │               │               │            │
//	protocol_   call_rejected     call_rejected   call_rejected   call_rejected  call_rejected
//	rejected    (unknown_tool)   (limit_exceeded) (schema_invalid)(tool_not_     (budget_
//	                                                               allowed)       exceeded)
//	─ tool_called ─ handler ─ result size ─ output schema ─ normalisation ─ ToolResult + tool_result
//	                   │          │              │
//	              tool_failed  tool_failed   tool_failed (output_invalid)
//	              (its code)   (limit_exceeded, no ToolResult)
//
// dispatch reads top to bottom as these stages, in DESIGN's order: the admission
// stages lookup, argument_size, input_schema, gate (visibility and Skill gates) and
// approval, each refusing with call_rejected; open (the budget charge and tool_called
// in one batch, synced or deferred as the durability stage decides); the handler;
// settle. The adapter decodes a call's arguments once; the handler gets the decoded
// value as Call.Value, and no layer below parses them again: the call's events reach
// the store as jsonexact.Doc (store.Tx.AppendDoc, checked without a parse), a
// tools.call hands its decoded arguments down (HostTools.CallToolValue), and a handler
// that holds its result as a Doc (a JIT tool's output, decoded once where it leaves
// the sandbox; echo's arguments) hands it to settle with Call.Return.
//
// A protocol-frame failure is never a tool failure and never has a tool_called event.
// A paused process, the Skill gate and an operator-class tool's approval (denied or
// timed out) are call_rejected too, with codes process_paused, tool_not_allowed,
// approval_denied and approval_timeout. Everything before tool_called leaves no open call; everything after it is settled
// by exactly one of tool_result or tool_failed. tool_called and the budget charge are
// one batch, as are the ToolResult and tool_result. A call left open by a crash is
// settled as unknown_settlement when the kernel is opened again, and is not retried.
//
// # Durability
//
// What the model is acknowledged with is the settlement, so it is synced before the
// call returns; so is every refusal (protocol_rejected, call_rejected) and every
// operator-visible change. tool_called and its budget charge are written deferred
// (store.UpdateDeferred): applied and visible at once, durable with the settlement's
// sync. The syscalls of the call are deferred the same way (Call.Syscalls has
// syscalls.Caller.Deferred set). The store's log survives a crash as a prefix, so nothing
// the call wrote can survive without its tool_called, and an acknowledged call is
// there whole; a crash before the settlement leaves either no trace of the call or an
// open call, reported as unknown settlement. A tool whose handler reaches outside the
// libOS must say so with Annotations.OpenWorld: its tool_called is then synced before
// the handler runs, since the store cannot order an effect it does not hold.
//
// # The adapter
//
// The adapter accepts OpenAI ({"type":"function","function":{name, arguments}},
// Responses function_call items, legacy {name, arguments}), Anthropic tool_use
// ({name, input}), MCP tools/call params or whole requests, and plain {name,
// arguments}. It trims the name; turns absent, null and "" arguments into {}; requires
// a string to decode to an object; removes a top-level "action" and injects the
// selected name as the internal action (Call.Action), using a string action as the
// name only when the name is missing or empty. JSON is decoded exactly by
// internal/jsonexact: duplicate keys, invalid UTF-8, lone surrogates, too deep
// nesting and frame keys in the wrong case are refused, and numbers keep their text.
//
// # Results
//
// A result is normalised to its canonical JSON text (compact, keys sorted, numbers as
// written) and returned twice, as Result.Structured and Result.Text, as MCP's
// structuredContent and text content do; the persisted ToolResult holds the same.
//
// # Images and processes
//
// An Image is a versioned manifest (format libos.image/v1, YAML or JSON, checked
// against an embedded JSON Schema; unknown fields refused; every problem listed at
// once in Error.Details): name, version, model-facing instructions, built-in tools,
// base tools, Skills (directories holding a SKILL.md, relative to the manifest),
// capabilities, projection, limits (argument/result sizes, depth, a tool-call budget,
// sandbox wall time and memory, syscall budgets) and approvals (routes by name, area
// or side-effect class; tools by name; every JIT tool with jit_tools). image.LoadImage reads one from an fs.FS;
// image.DefaultImage is embedded (package tools' DefaultImage supplies its Skills).
// The kernel adds the one check that needs it: every tool is one of its built-ins.
//
//	img, err := image.LoadImage(os.DirFS(dir), "image.yaml")
//	pid, err := k.SpawnImage(ctx, img)            // Spawn(ctx, ProcessConfig) still works
//
// The process record (store.Process) keeps the whole image, the live capabilities,
// the projection, the state, the active Skills and the operator's gate, so Open
// restores each running or paused process exactly. Operator calls: Grant, Revoke
// (effective at the next capability check, even inside a running call, because
// Call.Syscalls holds the live set), SetProjection, Pause, Resume,
// Kill, ListProcesses, Process; Checkpoint and Fork (new PID, new tool IDs, the
// candidates stay with their owner); every change is one batch with its event.
//
// JIT tools come back only through Config.JIT, a JITLoader (package tools' *JIT): on
// Open for every committed binding of a live process (same name, tool ID and schemas;
// recorded as tools_changed with change "rehydrated"), and on Fork for each binding
// re-created under the new PID. The kernel is the one place that rehydrates. A handler
// gets what it needs from the kernel as values of its Call: Call.Syscalls (its syscall
// authority) and Call.Sandbox (its sandbox bounds); it calls the kernel only to change
// the process (Call.InstallTool and Call.ToolKinds for the JIT lifecycle's register,
// Call.ActivateSkill and Call.DeactivateSkill for the Skill tools); Call.Return only
// keeps its result on the Call for the pipeline, and Call.Defer work for the pipeline
// to start while the settlement syncs (a JIT tool's sandbox restore).
//
// # Skills
//
// image.ParseSkill reads a SKILL.md (front matter name, description, allowed-tools).
// Loading an image refuses a Skill whose allowed-tools names run_jit_tool or a tool the image
// lacks. Instructions and Skills render the catalog; the Skill tool (package tools)
// calls Call.ActivateSkill, the deactivate_skill tool Call.DeactivateSkill (the
// operator's is Kernel.DeactivateSkill). An active Skill's allowed-tools names the
// tools its workflow uses and takes none away, unless the image sets skill_gate:
// strict: then, while Skills are active, a model call (or a tools.call made under one)
// passes only for the base tools, the two Skill tools, the active Skills'
// allowed-tools and, when one of them allows register_jit_tool, the process's JIT
// tools. Activation is durable; the catalog and activations never name a JIT tool in
// the multiplexed projection.
//
// # Approvals and the operator
//
// An operator-class tool (image approvals.tools, or any JIT tool under
// approvals.jit_tools) or route (approvals.routes, or the
// route table) creates a durable pending Approval: who (PID, via, calling tool and
// its ID), what (tool or route), the exact canonical arguments and the SHA-256 of the
// tool's definition. Approve/Deny decide it; a timeout (Config.ApprovalTimeout for
// tools, the router's for routes) expires it. A decision applies to one call with
// the same arguments and definition, also after a restart. The kernel is the
// syscalls.Approver of every call's Syscalls. The operator also reads Candidates (with
// their validation records), Bindings, Approvals/PendingApprovals, Events, VerifyLog,
// ExportEvents (JSON lines) and Checkpoints, and removes a JIT tool with
// RevokeBinding; UnknownSettlements and BindingFailures report what Open found.
package engine
