package jsonexact

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Doc is a JSON text known to be exact because this package made it: DecodeDoc parsed
// it, or Encode wrote it from a Value after checking every rule Decode enforces. It
// lets a value that one layer parsed travel to the next (the kernel to the store, a
// handler to the kernel) without being parsed again: the type is the proof, and only
// this package can produce one. The zero Doc is no document (IsZero).
//
// A Doc keeps its text as a string, so nobody can change it after the check; the
// Value it carries shares memory with the text and with whatever it was built from
// and must be treated as read-only.
type Doc struct {
	text  string
	v     Value
	depth int
}

// DecodeDoc parses data as one exact JSON value (Decode's rules) and returns it as a
// Doc whose text is data compacted, members in wire order.
func DecodeDoc(data []byte, maxDepth int) (Doc, error) {
	v, err := Decode(data, maxDepth)
	if err != nil {
		return Doc{}, err
	}
	return Doc{text: string(v.AppendCompact(make([]byte, 0, len(data)))), v: v, depth: depthOf(&v)}, nil
}

// Encode writes v as compact JSON (members in order, minimal escapes) and returns it
// as a Doc, checking on the way what Decode would: every string and key is valid
// UTF-8, every number follows the JSON number grammar, no object repeats a key,
// nesting stays within maxDepth (0: DefaultMaxDepth), every Kind is known. A Value
// from Decode always passes; one built by hand passes when it is one a decoder could
// have produced. It parses nothing.
func Encode(v Value, maxDepth int) (Doc, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	var e encoder
	e.max = maxDepth
	if err := e.check(&v, 0); err != nil {
		return Doc{}, err
	}
	return Doc{text: string(v.AppendCompact(make([]byte, 0, e.size))), v: v, depth: e.depth}, nil
}

// IsZero reports whether d is the zero Doc (no document).
func (d Doc) IsZero() bool { return d.text == "" }

// Text is the document's compact JSON text.
func (d Doc) Text() string { return d.text }

// Len is the length of the document's text in bytes.
func (d Doc) Len() int { return len(d.text) }

// Bytes returns a copy of the document's text.
func (d Doc) Bytes() []byte { return []byte(d.text) }

// Value is the document's value (read-only: it shares memory with the Doc).
func (d Doc) Value() Value { return d.v }

// Depth is the document's nesting: 0 for a scalar, 1 for a flat array or object.
// A reader with a tighter bound than the one the Doc was made under checks it here.
func (d Doc) Depth() int { return d.depth }

// depthOf is the nesting of v (the outermost container is depth 1).
func depthOf(v *Value) int {
	n := 0
	for i := range v.A {
		n = max(n, depthOf(&v.A[i]))
	}
	for i := range v.O {
		n = max(n, depthOf(&v.O[i].Val))
	}
	if v.Kind == Array || v.Kind == Object {
		n++
	}
	return n
}

// Kind is the JSON type of the document's value.
func (d Doc) Kind() Kind { return d.v.Kind }

// String returns the top-level member key of an object document when it is a string.
func (d Doc) String(key string) (s string, ok bool) {
	if d.v.Kind != Object {
		return "", false
	}
	m, ok := d.v.Get(key)
	if !ok || m.Kind != String {
		return "", false
	}
	return m.S, true
}

// Has reports whether an object document has the top-level member key.
func (d Doc) Has(key string) bool {
	_, ok := d.v.Get(key)
	return ok && d.v.Kind == Object
}

// encoder checks a Value before it is written and sizes its text.
type encoder struct {
	max   int
	size  int
	depth int // the deepest nesting seen
}

// errNotExact is the cause of every Encode refusal; the message says which rule.
var errNotExact = errors.New("not exact JSON")

func (e *encoder) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errNotExact}, args...)...)
}

func (e *encoder) check(v *Value, depth int) error {
	if v.Kind == Array || v.Kind == Object {
		e.depth = max(e.depth, depth+1)
	}
	switch v.Kind {
	case Null, Bool:
		e.size += 5
	case Number:
		if !validNumber(v.S) {
			return e.fail("%q is not a JSON number", v.S)
		}
		e.size += len(v.S)
	case String:
		if !utf8.ValidString(v.S) {
			return e.fail("a string is not valid UTF-8")
		}
		e.size += len(v.S) + 2
	case Array:
		if depth+1 > e.max {
			return e.fail("nesting deeper than %d levels", e.max)
		}
		e.size += 2 + len(v.A)
		for i := range v.A {
			if err := e.check(&v.A[i], depth+1); err != nil {
				return err
			}
		}
	case Object:
		if depth+1 > e.max {
			return e.fail("nesting deeper than %d levels", e.max)
		}
		e.size += 2 + 2*len(v.O)
		var seen map[string]struct{}
		for i := range v.O {
			k := v.O[i].Key
			if !utf8.ValidString(k) {
				return e.fail("a key is not valid UTF-8")
			}
			if i < 16 {
				for j := range i {
					if v.O[j].Key == k {
						return e.fail("duplicate key %q", k)
					}
				}
			} else {
				if seen == nil {
					seen = make(map[string]struct{}, 2*len(v.O))
					for j := range i {
						seen[v.O[j].Key] = struct{}{}
					}
				}
				if _, dup := seen[k]; dup {
					return e.fail("duplicate key %q", k)
				}
				seen[k] = struct{}{}
			}
			e.size += len(k) + 2
			if err := e.check(&v.O[i].Val, depth+1); err != nil {
				return err
			}
		}
	default:
		return e.fail("unknown kind %d", v.Kind)
	}
	return nil
}

// validNumber reports whether s is a JSON number (RFC 8259 grammar).
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// Str is a String value holding s, made valid UTF-8 the way encoding/json does it:
// each invalid byte becomes U+FFFD. Host text (a route name a guest sent, an error
// message) always encodes.
func Str(s string) Value {
	if utf8.ValidString(s) {
		return Value{Kind: String, S: s}
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return Value{Kind: String, S: string(b)}
}

// Int is a Number value holding n.
func Int(n int64) Value { return Value{Kind: Number, S: strconv.FormatInt(n, 10)} }

// Boolean is a Bool value holding b.
func Boolean(b bool) Value { return Value{Kind: Bool, B: b} }

// Strs is an Array value of the strings ss (each as Str makes it).
func Strs(ss []string) Value {
	a := make([]Value, len(ss))
	for i, s := range ss {
		a[i] = Str(s)
	}
	return Value{Kind: Array, A: a}
}

// Obj is an Object value with members ms, in that order (Encode refuses a repeated key).
func Obj(ms ...Member) Value {
	if ms == nil {
		ms = []Member{}
	}
	return Value{Kind: Object, O: ms}
}
