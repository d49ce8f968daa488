// Package engine is the kernel of Agent libOS: every model tool call passes through it.
//
// It owns the Kernel (open, close, rehydrate), processes and their tool tables, the
// tool-call adapter that normalises provider frames, the projections (direct and
// multiplexed) and their renderings for MCP, OpenAI and Anthropic, the dispatch
// pipeline, limits and budgets, result normalisation and the events of a call.
// Images, approvals and Skills extend it.
//
// It must not know about QuickJS, esbuild or Pebble keys: the sandbox is reached
// through handlers (package tools builds them, JIT tools come through InstallTool),
// programs through package jsbundle, durable state through package store's typed API
// (records, atomic Update batches, the hash-chained event log). It never imports
// package tools: tools import engine's types.
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
// A protocol-frame failure is never a tool failure and never has a tool_called event.
// Everything before tool_called leaves no open call; everything after it is settled
// by exactly one of tool_result or tool_failed. tool_called and the budget charge are
// one durable batch, as are the ToolResult and tool_result. A call left open by a
// crash is settled as unknown_settlement when the kernel is opened again, and is not
// retried.
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
// engine/internal/jsonx: duplicate keys, invalid UTF-8, lone surrogates, too deep
// nesting and frame keys in the wrong case are refused, and numbers keep their text.
//
// # Results
//
// A result is normalised to its canonical JSON text (compact, keys sorted, numbers as
// written) and returned twice, as Result.Structured and Result.Text, as MCP's
// structuredContent and text content do; the persisted ToolResult holds the same.
package engine
