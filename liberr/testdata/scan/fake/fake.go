// Package fake makes its codes every way the registry scan must see: no constant
// named Code…, no &Error{Code: …} literal.
package fake

import "github.com/agentlibos/libos/liberr"

type Code = liberr.Code

const typed Code = "by_typed_const"

var sentinelErr = sentinel("by_sentinel")

func sentinel(c Code) *liberr.Error { return &liberr.Error{Layer: "fake", Code: c} }

func errorf(msg string, c liberr.Code, other liberr.Code) error {
	return liberr.New("fake", c, "%s (also %s)", msg, other)
}

func emit(reason string) error {
	switch reason {
	case "a":
		return errorf("made here", "by_ctor", "by_ctor_second")
	case "b":
		return liberr.Wrap("fake", Code("by_conversion"), nil, "converted")
	case "c":
		return liberr.Wrap("fake", "by_wrap", sentinelErr, "wrapped")
	case "d":
		return sentinel(liberr.CodeCanceled)
	case "e":
		return liberr.WrapQuoting("fake", "by_wrap_quoting", sentinelErr, "quoted")
	}
	return errorf(reason, typed, typed)
}
