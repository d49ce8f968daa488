package jsonexact

import "sync/atomic"

// decodes counts the documents DecodeString has parsed since the program started: the
// measure behind "a call's arguments are parsed once" (a test counts the parses one
// call costs). It is one atomic add per document, and changes nothing else.
var decodes atomic.Uint64

// Decodes returns how many documents Decode, DecodeString, DecodeAny, Valid and
// SplitObject have parsed so far.
func Decodes() uint64 { return decodes.Load() }
