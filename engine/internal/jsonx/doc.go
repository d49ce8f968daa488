// Package jsonx decodes and encodes JSON exactly.
//
// Decoding is strict RFC 8259 plus the rules the tool-call adapter needs: duplicate keys
// are rejected (compared after unescaping), invalid UTF-8 and lone surrogate escapes are
// rejected, nesting depth is bounded, and numbers keep their literal text so 2^53+1 and
// 1.000 survive unchanged. Object members keep their wire order; Canonical sorts them.
//
// The adapter feeds it raw provider frames and hands its values to the pipeline; it
// knows nothing of tools, frames or events.
package jsonx
