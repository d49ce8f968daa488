// Package jsonv decodes JSON exactly and compares JSON values by value. It is shared by
// the packages that must agree on what "the same JSON value" means: the tape player in
// syscalls and the validator in tools.
//
// Exact means: one value, valid UTF-8, no duplicate object keys, bounded nesting, and
// numbers kept as their text (json.Number), never rounded through float64. Values
// compare by JSON value: object member order is irrelevant, numbers compare by their
// decimal value (1, 1.0 and 1e0 are equal), everything else must match in type and
// content. Diff names the first difference as a JSON path ($.a[2]["b c"]).
//
// It holds no state and knows nothing of tapes, tests or routes; its callers decide what
// a difference means.
package jsonv
