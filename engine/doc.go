// Package engine is the kernel of Agent libOS: every model tool call passes through it.
//
// It owns the Kernel (open, close, rehydrate), images and processes, the process tool
// table, the tool-call adapter that normalises provider frames, the projections
// (direct and multiplexed), the dispatch pipeline, limits, result normalisation,
// events, approvals, budgets and Skills.
//
// It must not know about QuickJS, esbuild or Pebble keys: the sandbox is reached
// through package wasm, programs through package jsbundle, durable state through
// package store's typed API. Data comes in as provider frames and leaves as
// normalised results and durable events.
package engine
