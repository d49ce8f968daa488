package syscalls

import (
	"bytes"
	"errors"
	"sort"
	"unicode/utf16"
	"unicode/utf8"
)

// A server that received a secret can echo it back in a redirect's location, a header
// or the body, and not only byte for byte: in another case, percent-encoded, or as
// JSON escapes, character by character and in any mix ("T%6Fk\u0065n"). Redaction
// therefore reads the text through those spellings: it decodes every %XX, every JSON
// escape (\uXXXX, surrogate pairs, \" \\ \/ \b \f \n \r \t) and folds ASCII case, finds
// the secret in what that reads (a \u escape is read also when its backslash is
// doubled, as text quoted twice writes it), and replaces the source text it came from with the
// secret's placeholder. A decoding that makes a match where none was meant only wipes
// more. What is not caught: other transformations (base64, reversal, hashing, nested
// encodings, case folding beyond ASCII), which is why a secret's hosts must be
// servers trusted with it.

// redaction is a secret value that must not reach the guest, and the placeholder that
// stands for it.
type redaction struct {
	value, name string
}

func (r redaction) placeholder() string { return "{{secret:" + r.name + "}}" }

// spelled is text read through the spellings a secret is recognised in: read holds
// the decoded bytes, ASCII folded to lower case, and unit[i] the source span
// [start, end) that read[i] came from (the bytes of one escape share one span).
type spelled struct {
	read []byte
	unit [][2]int
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// uEscape reads a \uXXXX escape at s[i:], its backslash written once or more: text
// quoted again (a Go error quoting a location, JSON inside JSON) doubles it.
func uEscape(s string, i int) (rune, int, bool) {
	j := i
	for j < len(s) && s[j] == '\\' {
		j++
	}
	if j == i || j >= len(s) || s[j] != 'u' {
		return 0, 0, false
	}
	r, ok := hex4(s, j+1)
	return r, j + 5, ok
}

// hex4 reads four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		d, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

var jsonShort = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func readSpellings(s string) spelled {
	sp := spelled{read: make([]byte, 0, len(s)), unit: make([][2]int, 0, len(s))}
	emit := func(b []byte, start, end int) {
		for _, c := range b {
			sp.read = append(sp.read, lowerASCII(c))
			sp.unit = append(sp.unit, [2]int{start, end})
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			h, ok1 := unhex(s[i+1])
			l, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				emit([]byte{h<<4 | l}, i, i+3)
				i += 3
				continue
			}
		}
		if c == '\\' {
			if r, end, ok := uEscape(s, i); ok {
				if utf16.IsSurrogate(r) {
					r2, end2, ok := uEscape(s, end)
					if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
						emit(utf8.AppendRune(nil, r), i, end2)
						i = end2
						continue
					}
					// A lone surrogate spells no character: read as it is written.
				} else {
					emit(utf8.AppendRune(nil, r), i, end)
					i = end
					continue
				}
			} else if i+1 < len(s) {
				if b, ok := jsonShort[s[i+1]]; ok {
					emit([]byte{b}, i, i+2)
					i += 2
					continue
				}
			}
		}
		emit([]byte{c}, i, i+1)
		i++
	}
	return sp
}

// redactString replaces every spelling of every value in s with the value's
// placeholder.
func redactString(s string, values []redaction) string {
	if len(values) == 0 || s == "" {
		return s
	}
	sp := readSpellings(s)
	type hit struct {
		start, end int
		r          redaction
	}
	var hits []hit
	for _, v := range values {
		needle := []byte(v.value)
		for i := range needle {
			needle[i] = lowerASCII(needle[i])
		}
		if len(needle) == 0 {
			continue
		}
		for from := 0; from+len(needle) <= len(sp.read); {
			j := bytes.Index(sp.read[from:], needle)
			if j < 0 {
				break
			}
			a, z := from+j, from+j+len(needle)-1
			// A match starts and ends on whole units: never inside one escape.
			if (a == 0 || sp.unit[a-1] != sp.unit[a]) && (z == len(sp.read)-1 || sp.unit[z+1] != sp.unit[z]) {
				hits = append(hits, hit{sp.unit[a][0], sp.unit[z][1], v})
				from = z + 1
				continue
			}
			from = a + 1
		}
	}
	if len(hits) == 0 {
		return s
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].start < hits[j].start })
	var out []byte
	last := 0
	for _, h := range hits {
		if h.start < last {
			// Overlaps a span already wiped: wipe the rest of it too.
			if h.end > last {
				last = h.end
			}
			continue
		}
		out = append(out, s[last:h.start]...)
		out = append(out, h.r.placeholder()...)
		last = h.end
	}
	out = append(out, s[last:]...)
	return string(out)
}

func redactBytes(b []byte, values []redaction) []byte {
	if len(values) == 0 {
		return b
	}
	return []byte(redactString(string(b), values))
}

// redactError returns err with every spelling of every value wiped from its message
// and its cause's text. A cause whose text held one is replaced by its wiped text.
func redactError(err error, values []redaction) error {
	if len(values) == 0 || err == nil {
		return err
	}
	var se *Error
	if !errors.As(err, &se) {
		return errors.New(redactString(err.Error(), values))
	}
	out := *se
	out.Message = redactString(se.Message, values)
	if se.Err != nil {
		if text := se.Err.Error(); redactString(text, values) != text {
			out.Err = errors.New(redactString(text, values))
		}
	}
	if len(se.Details) > 0 {
		out.Details = append(out.Details[:0:0], se.Details...)
		for i := range out.Details {
			out.Details[i].Message = redactString(out.Details[i].Message, values)
			out.Details[i].Path = redactString(out.Details[i].Path, values)
		}
	}
	return &out
}

// redactNet wipes every spelling of every value from what the audit event keeps of a
// fetch: the hosts and paths a redirect named.
func redactNet(n *auditNet, values []redaction) {
	if n == nil || len(values) == 0 {
		return
	}
	n.Host, n.Path = redactString(n.Host, values), redactString(n.Path, values)
	for i := range n.Hops {
		n.Hops[i].Host, n.Hops[i].Path = redactString(n.Hops[i].Host, values), redactString(n.Hops[i].Path, values)
	}
}
