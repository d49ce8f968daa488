package jsonexact

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Problem classifies a decoding failure.
type Problem uint8

const (
	Malformed Problem = iota + 1 // not JSON: bad token, truncated, bad escape, bad number
	DuplicateKey
	InvalidUTF8 // invalid UTF-8 bytes or a lone surrogate escape
	TooDeep
	TrailingData
)

// Error is a decoding failure at a byte offset of the input.
type Error struct {
	Problem Problem
	Offset  int
	Reason  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d", e.Reason, e.Offset) }

// DefaultMaxDepth bounds nesting when Decode is given no bound. The kernel passes its
// own, tighter limit (engine.Limits.MaxDepth); this is the bound of the syscall
// boundary, tapes and reports.
const DefaultMaxDepth = 128

// Decode decodes exactly one JSON value from data. maxDepth bounds the nesting of
// arrays and objects (the outermost container is depth 1); 0 means DefaultMaxDepth.
func Decode(data []byte, maxDepth int) (Value, error) {
	// One copy of the input; every unescaped string and number is a substring of it.
	return DecodeString(string(data), maxDepth)
}

// DecodeString is Decode for input held in a string; decoded strings and numbers
// share its memory.
func DecodeString(data string, maxDepth int) (Value, error) {
	decodes.Add(1)
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	d := decoders.Get().(*decoder)
	d.data, d.pos, d.maxDepth = data, 0, maxDepth
	v, err := d.run()
	// Scratch stacks go back empty and cleared, so the pool retains no input. A
	// successful decode has cleared them already, container by container.
	if err != nil {
		clear(d.members[:cap(d.members)])
		clear(d.elems[:cap(d.elems)])
	}
	d.members, d.elems, d.data = d.members[:0], d.elems[:0], ""
	if cap(d.buf) <= 64<<10 && cap(d.members) <= 1024 && cap(d.elems) <= 1024 {
		decoders.Put(d)
	}
	return v, err
}

var decoders = sync.Pool{New: func() any {
	return &decoder{members: make([]Member, 0, 32), elems: make([]Value, 0, 32), buf: make([]byte, 0, 256)}
}}

func (d *decoder) run() (Value, error) {
	d.skipSpace()
	v, err := d.value(0)
	if err != nil {
		return Value{}, err
	}
	d.skipSpace()
	if d.pos < len(d.data) {
		return Value{}, d.fail(TrailingData, "unexpected data after the JSON value")
	}
	return v, nil
}

type decoder struct {
	data     string
	pos      int
	maxDepth int
	buf      []byte
	// members and elems are scratch stacks shared by all nesting levels: a container
	// is collected on top of the stack and copied out once, exactly sized, when it
	// closes.
	members []Member
	elems   []Value
}

func (d *decoder) fail(p Problem, format string, args ...any) *Error {
	return &Error{Problem: p, Offset: d.pos, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (Value, error) {
	if d.pos >= len(d.data) {
		return Value{}, d.fail(Malformed, "unexpected end of JSON input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, err := d.str()
		return Value{Kind: String, S: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return Value{Kind: Bool, B: true}, d.literal("true")
	case c == 'f':
		return Value{Kind: Bool}, d.literal("false")
	case c == 'n':
		return Value{Kind: Null}, d.literal("null")
	default:
		return Value{}, d.fail(Malformed, "invalid character %s looking for a value", quoteByte(c))
	}
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.Quote(string(c))
	}
	return fmt.Sprintf("0x%02x", c)
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || d.data[d.pos:d.pos+len(lit)] != lit {
		return d.fail(Malformed, "invalid literal, expected %q", lit)
	}
	d.pos += len(lit)
	return nil
}

func (d *decoder) object(depth int) (Value, error) {
	if depth > d.maxDepth {
		return Value{}, d.fail(TooDeep, "nesting deeper than %d levels", d.maxDepth)
	}
	d.pos++ // '{'
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return Value{Kind: Object, O: []Member{}}, nil
	}
	base := len(d.members)
	var seen map[string]struct{}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			if d.pos >= len(d.data) {
				return Value{}, d.fail(Malformed, "unexpected end of JSON input in object")
			}
			return Value{}, d.fail(Malformed, "invalid character %s looking for an object key", quoteByte(d.data[d.pos]))
		}
		keyAt := d.pos
		key, err := d.str()
		if err != nil {
			return Value{}, err
		}
		// Duplicate detection on the decoded key: "a" and "\u0061" are the same key.
		cur := d.members[base:]
		if len(cur) < 16 {
			for i := range cur {
				if cur[i].Key == key {
					return Value{}, &Error{Problem: DuplicateKey, Offset: keyAt, Reason: fmt.Sprintf("duplicate key %q", key)}
				}
			}
		} else {
			if seen == nil {
				seen = make(map[string]struct{}, 2*len(cur))
				for i := range cur {
					seen[cur[i].Key] = struct{}{}
				}
			}
			if _, dup := seen[key]; dup {
				return Value{}, &Error{Problem: DuplicateKey, Offset: keyAt, Reason: fmt.Sprintf("duplicate key %q", key)}
			}
			seen[key] = struct{}{}
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return Value{}, d.fail(Malformed, "expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		val, err := d.value(depth)
		if err != nil {
			return Value{}, err
		}
		d.members = append(d.members, Member{Key: key, Val: val})
		if end, err := d.next('}', "object", "object member"); err != nil {
			return Value{}, err
		} else if end {
			return Value{Kind: Object, O: pop(&d.members, base)}, nil
		}
	}
}

func (d *decoder) array(depth int) (Value, error) {
	if depth > d.maxDepth {
		return Value{}, d.fail(TooDeep, "nesting deeper than %d levels", d.maxDepth)
	}
	d.pos++ // '['
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return Value{Kind: Array, A: []Value{}}, nil
	}
	base := len(d.elems)
	for {
		val, err := d.value(depth)
		if err != nil {
			return Value{}, err
		}
		d.elems = append(d.elems, val)
		if end, err := d.next(']', "array", "array element"); err != nil {
			return Value{}, err
		} else if end {
			return Value{Kind: Array, A: pop(&d.elems, base)}, nil
		}
	}
}

// next reads what follows a member of an object or an element of an array: a ','
// (another comes) or closer (the container ends, end is true). Anything else, or the
// end of the input, is malformed; in names the container and after what precedes.
func (d *decoder) next(closer byte, in, after string) (end bool, err error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.fail(Malformed, "unexpected end of JSON input in %s", in)
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.skipSpace()
		return false, nil
	case closer:
		d.pos++
		return true, nil
	}
	return false, d.fail(Malformed, "invalid character %s after %s", quoteByte(d.data[d.pos]), after)
}

// pop returns a copy of the scratch stack's entries from base on and truncates the
// stack to base, cleared, so that the pooled decoder keeps no reference to a value.
func pop[T any](stack *[]T, base int) []T {
	out := slices.Clone((*stack)[base:])
	clear((*stack)[base:])
	*stack = (*stack)[:base]
	return out
}

func (d *decoder) number() (Value, error) {
	start := d.pos
	data := d.data
	i := d.pos
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		return Value{}, d.fail(Malformed, "invalid number")
	}
	if i < len(data) && data[i] == '.' {
		i++
		j := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == j {
			d.pos = i
			return Value{}, d.fail(Malformed, "invalid number: no digits after the decimal point")
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == j {
			d.pos = i
			return Value{}, d.fail(Malformed, "invalid number: no digits in the exponent")
		}
	}
	d.pos = i
	return Value{Kind: Number, S: data[start:i]}, nil
}

// str decodes a string starting at the opening quote.
func (d *decoder) str() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	data := d.data
	// Fast path: no escapes, ASCII only.
	i := start
	for i < len(data) {
		c := data[i]
		if c == '"' {
			d.pos = i + 1
			return data[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	buf := append(d.buf[:0], data[start:i]...)
	for {
		if i >= len(data) {
			d.pos = i
			return "", d.fail(Malformed, "unexpected end of JSON input in string")
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.buf = buf
			return string(buf), nil
		case c < 0x20:
			d.pos = i
			return "", d.fail(Malformed, "invalid control character %s in string", quoteByte(c))
		case c < 0x80 && c != '\\':
			buf = append(buf, c)
			i++
		case c >= 0x80:
			r, size := utf8.DecodeRuneInString(data[i:])
			if r == utf8.RuneError && size <= 1 {
				d.pos = i
				return "", d.fail(InvalidUTF8, "invalid UTF-8 in string")
			}
			buf = append(buf, data[i:i+size]...)
			i += size
		default: // backslash
			if i+1 >= len(data) {
				d.pos = i
				return "", d.fail(Malformed, "unexpected end of JSON input in string escape")
			}
			e := data[i+1]
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					d.pos = i
					return "", d.fail(Malformed, "invalid \\u escape in string")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
						d.pos = i - 6
						return "", d.fail(InvalidUTF8, "lone surrogate \\u%04x in string", r)
					}
					r2, ok := hex4(data, i+2)
					if !ok || r2 < 0xdc00 || r2 > 0xdfff {
						d.pos = i - 6
						return "", d.fail(InvalidUTF8, "lone surrogate \\u%04x in string", r)
					}
					r = utf16.DecodeRune(r, r2)
					i += 6
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				d.pos = i
				return "", d.fail(Malformed, "invalid escape %s in string", quoteByte(e))
			}
			i += 2
		}
	}
}

func hex4(data string, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(data[at : at+4]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Valid reports whether data is exact JSON (Decode accepts it within maxDepth).
func Valid(data []byte, maxDepth int) bool {
	_, err := Decode(data, maxDepth)
	return err == nil
}
