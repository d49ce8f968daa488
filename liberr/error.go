package liberr

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Code is a stable machine code. Models, audit events, MCP clients and embedders
// match on it; the message is for people and may change.
type Code string

// Error is the error of every package of the module. Match it with errors.Is against
// any error with the same code (the packages' Err* sentinels are *Error values) and
// read it with errors.As(err, &e) where e is a *liberr.Error.
type Error struct {
	Code Code
	// Layer is the package that emitted the error ("engine", "syscalls", …). Error()
	// prefixes the message with it; an error whose text must not say which layer
	// refused (an unknown syscall) leaves it empty.
	Layer string
	// Message says what happened, for people, without the layer's name.
	Message string
	// Details lists individual findings (schema violations, manifest problems) as data.
	Details []Detail
	// Err is the underlying cause. It is never shown to a model.
	Err error
}

// Detail is one finding inside an error, such as one schema violation.
type Detail struct {
	Path    string `json:"path"` // JSON Pointer into the document
	Message string `json:"message"`
}

// New returns an error of layer with code and a formatted message.
func New(layer string, code Code, format string, args ...any) *Error {
	if len(args) > 0 {
		format = fmt.Sprintf(format, args...)
	}
	return &Error{Code: code, Layer: layer, Message: format}
}

// Wrap is New with a cause.
func Wrap(layer string, code Code, cause error, format string, args ...any) *Error {
	e := New(layer, code, format, args...)
	e.Err = cause
	return e
}

// WrapQuoting is Wrap for a failure passed along whose own words the reader needs
// (what the file system, Pebble or the store said): the message is msg, then ": " and
// the cause's text (msg alone when cause is nil). Every layer that reports a storage
// failure this way calls it, so the shape of such a message is decided once.
func WrapQuoting(layer string, code Code, cause error, msg string) *Error {
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &Error{Code: code, Layer: layer, Message: msg, Err: cause}
}

// Error returns "layer: message", or the message alone when Layer is empty, or the
// code when there is no message.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	if e.Layer == "" {
		return msg
	}
	return e.Layer + ": " + msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code as a string.
func (e *Error) ErrorCode() string { return string(e.Code) }

// Is reports whether target carries the same code, whichever layer made either:
// errors.Is(err, engine.ErrLimitExceeded) holds for a limit_exceeded from the sandbox.
func (e *Error) Is(target error) bool {
	if e.Code == "" {
		return false
	}
	t, ok := target.(interface{ ErrorCode() string })
	return ok && t.ErrorCode() == string(e.Code)
}

// CodeOf returns the code of the outermost error in err's chain that has one (an
// ErrorCode() string method, as *Error has), in the order errors.As searches it: an error that wraps a coded error is what its maker
// meant, so its code wins over the wrapped one. It returns "" for nil and for an
// error without a code.
func CodeOf(err error) Code {
	if c := outermost(err); c != nil {
		return Code(c.ErrorCode())
	}
	return ""
}

// CodeOr is CodeOf with a fallback: the code of err, or fallback when err (not nil)
// carries none. A caller that must report some code for any failure (the engine, for
// a handler's plain error: tool_failed) names its own fallback here rather than
// keeping a CodeOf of its own.
func CodeOr(err error, fallback Code) Code {
	if err == nil {
		return ""
	}
	if c := CodeOf(err); c != "" {
		return c
	}
	return fallback
}

// Outermost returns the outermost coded error in err's chain (see CodeOf) when it is
// an *Error, else nil.
func Outermost(err error) *Error {
	e, _ := outermost(err).(*Error)
	return e
}

type coded interface {
	error
	ErrorCode() string
}

func outermost(err error) coded {
	for err != nil {
		if c, ok := err.(coded); ok && c.ErrorCode() != "" {
			return c
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if c := outermost(inner); c != nil {
					return c
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// As is errors.As for the one type, for brevity at call sites.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// AsLayer is errors.As for the errors one layer made: the outermost *Error in err's
// chain whose Layer is layer. Every package's errors are one type, so a package that
// must tell its own refusals from a failure it passes along (a store error inside a
// callback's result, say) asks for its layer, not for a type.
func AsLayer(err error, layer string) (*Error, bool) {
	for err != nil {
		if e, ok := err.(*Error); ok && e.Layer == layer {
			return e, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if e, ok := AsLayer(inner, layer); ok {
					return e, true
				}
			}
			return nil, false
		default:
			return nil, false
		}
	}
	return nil, false
}

// ClipMark is what Clip appends to a text it cut. It is the one spelling of the
// marker: code that must recognise a clipped text (to redact a secret cut in half at
// the end, say) looks for this constant, not for a literal of its own.
const ClipMark = "…"

// Clip returns s as valid UTF-8 (invalid bytes become U+FFFD) cut to at most n bytes
// on a character boundary, with ClipMark appended when it was cut: a message a guest or a
// client made can be megabytes long, or not text at all, and neither the audit log
// nor a model should carry it. It is the one clip of the module.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + ClipMark
}

// Cut returns the longest prefix of s of at most n bytes that ends on a character
// boundary, as valid UTF-8 (invalid bytes become U+FFFD), with no marker: for a bound
// whose cut the caller reports in its own way (the sandbox's console, which stops
// the program and says the logs were truncated). Clip is Cut with the marker.
func Cut(s string, n int) string {
	if len(s) > n {
		cut := max(n, 0)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// DescribeDetails writes the first three details as one line ("at /a: …; at /b: …;
// and 2 more"), for an error's message.
func DescribeDetails(ds []Detail) string {
	var b strings.Builder
	for i, d := range ds {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(ds)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		p := d.Path
		if p == "" {
			p = "/"
		}
		fmt.Fprintf(&b, "at %s: %s", p, d.Message)
	}
	return b.String()
}
