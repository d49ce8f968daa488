// Package jsonexact is the one definition of exact JSON in the libOS. Every layer that
// takes JSON from outside (the tool-call adapter, the syscall boundary, the store, the
// MCP transports, tapes and tool reports) decodes it here, so a text one layer accepts
// is never refused or read differently by another.
//
// Exact means: exactly one RFC 8259 value and nothing after it but white space; valid
// UTF-8 and no lone surrogate escape (encoding/json would turn "\ud800" into U+FFFD, a
// different string than was sent, so two different texts could meet as one key); no
// duplicate object key at any depth, compared after unescaping ("a" and "\u0061" are
// the same key); nesting bounded (the caller's bound, DefaultMaxDepth without one);
// numbers kept as their literal text, so 2^53+1 and 1.000 survive unchanged.
//
// Decode gives a Value (members in wire order; Compact and Canonical render it);
// DecodeAny the map[string]any shape JSON Schema validators consume; SplitObject the
// compact text and raw top-level members of an object the store hashes. Equal and Diff
// compare two values by JSON value (numbers by decimal value, member order ignored);
// Inexact finds numbers a float64 would change, and DiffNote explains a difference
// that no JavaScript value could avoid (an expected number no double equals).
//
// It holds no state and knows nothing of frames, tools, routes, tapes or records; its
// callers decide what a failure or a difference means and which error code it gets.
package jsonexact
