// Package fixture holds the ways of reading a code or a layer out of error text that
// TestScanSeesErrorText expects scanErrorText to find. It is read as text, never built.
package fixture

import "strings"

type Error struct{ Layer, Message string }

const Layer = "syscalls"

func afterReturn(code, reason string) bool {
	return code == "limit_exceeded" && strings.Contains(reason, "result limit")
}

func recorded(text string) *Error {
	if msg, ok := strings.CutPrefix(text, Layer+": "); ok {
		return &Error{Layer: Layer, Message: msg}
	}
	return &Error{Message: text}
}

func byMessage(e *Error) bool { return strings.HasPrefix(e.Message, "tape: ") }

func byError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "lock held")
}

func equal(err error) bool { return err.Error() == "EOF" }
