package jsonexact

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is the JSON type of a Value.
type Kind uint8

const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"null", "boolean", "number", "string", "array", "object"}

func (k Kind) String() string { return kindNames[k] }

// Value is one decoded JSON value. For String, S is the decoded text; for Number, S is
// the literal as written (already checked against the JSON number grammar).
type Value struct {
	Kind Kind
	B    bool
	S    string
	A    []Value
	O    []Member
}

// Member is one object member, in wire order.
type Member struct {
	Key string
	Val Value
}

// Get returns the member named key (exact, case-sensitive match).
func (v *Value) Get(key string) (*Value, bool) {
	for i := range v.O {
		if v.O[i].Key == key {
			return &v.O[i].Val, true
		}
	}
	return nil, false
}

// Remove deletes the member named key from an object in place and reports whether
// it was present. The value must not share its members with another value.
func (v *Value) Remove(key string) bool {
	for i := range v.O {
		if v.O[i].Key == key {
			v.O = append(v.O[:i], v.O[i+1:]...)
			return true
		}
	}
	return false
}

// Compact returns the value as compact JSON, members in wire order.
func (v Value) Compact() []byte { return v.AppendCompact(nil) }

// AppendCompact appends compact JSON, members in wire order.
func (v Value) AppendCompact(dst []byte) []byte { return v.appendTo(dst, false) }

// Canonical returns the canonical text of the value: compact, object members sorted by
// key (byte order of the UTF-8 text, which is code point order), strings with the
// minimal escapes, numbers exactly as written. Two values that differ only in wire
// white space, key order or string escape spelling have the same canonical text.
func (v Value) Canonical() []byte { return v.AppendCanonical(nil) }

// AppendCanonical appends the canonical text of the value.
func (v Value) AppendCanonical(dst []byte) []byte { return v.appendTo(dst, true) }

func (v Value) appendTo(dst []byte, sorted bool) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Bool:
		if v.B {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case Number:
		return append(dst, v.S...)
	case String:
		return AppendString(dst, v.S)
	case Array:
		dst = append(dst, '[')
		for i := range v.A {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = v.A[i].appendTo(dst, sorted)
		}
		return append(dst, ']')
	default:
		members := v.O
		if sorted && !slices.IsSortedFunc(members, cmpMember) {
			members = slices.Clone(members)
			slices.SortFunc(members, cmpMember)
		}
		dst = append(dst, '{')
		for i := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, members[i].Key)
			dst = append(dst, ':')
			dst = members[i].Val.appendTo(dst, sorted)
		}
		return append(dst, '}')
	}
}

func cmpMember(a, b Member) int { return strings.Compare(a.Key, b.Key) }

const hexDigits = "0123456789abcdef"

// AppendString appends s (valid UTF-8) as a JSON string with the minimal escapes: the
// quote, the backslash and control characters below U+0020.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = AppendEscapedByte(append(dst, s[start:i]...), c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendEscapedByte appends the escape JSON text uses for an ASCII byte that cannot
// stand for itself in a string: the quote, the backslash, or a control character below
// U+0020 (the short forms where JSON has them, \u00XX otherwise). It is the one place
// this module spells those escapes; the store's encoding/json-compatible encoder uses it
// too.
func AppendEscapedByte(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// ToAny converts the value to the representation encoding/json produces with
// UseNumber (map[string]any, []any, json.Number, string, bool, nil), which is what
// JSON Schema validators consume. Numbers stay exact.
func (v Value) ToAny() any {
	switch v.Kind {
	case Null:
		return nil
	case Bool:
		return v.B
	case Number:
		return json.Number(v.S)
	case String:
		return v.S
	case Array:
		a := make([]any, len(v.A))
		for i := range v.A {
			a[i] = v.A[i].ToAny()
		}
		return a
	default:
		m := make(map[string]any, len(v.O))
		for i := range v.O {
			m[v.O[i].Key] = v.O[i].Val.ToAny()
		}
		return m
	}
}

// ValidString reports whether s is valid UTF-8 (what a decoded String always is).
func ValidString(s string) bool { return utf8.ValidString(s) }

// EscapePointer escapes s as one reference token of a JSON Pointer (RFC 6901): "~"
// becomes "~0" and "/" becomes "~1".
func EscapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
