package syscalls

import (
	"bytes"
	"encoding/base64"
	"errors"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A server that received a secret can echo it back in a redirect's location, a header
// or the body, and not only byte for byte: in another case, percent-encoded (once or
// more: "%2541"), as a form writes it ("+" for a space), or as JSON escapes, character
// by character and in any mix ("T%6Fk\u0065n"), or in base64 (a Basic authorization
// echoed, the secret at any offset of the encoded text, in the standard or the URL
// alphabet). Redaction therefore reads the text through those spellings: it decodes
// every %XX (and %25XX, %2525XX, …), every JSON escape (\uXXXX, surrogate pairs, \"
// \\ \/ \b \f \n \r \t), reads "+" as a space and folds ASCII case, finds the secret,
// or the part of its base64 form that does not depend on its neighbours, in what that
// reads (a \u escape is read also when its backslash is doubled, as text quoted twice
// writes it), and replaces the source text it came from with the secret's
// placeholder. A decoding that makes a match where none was meant only wipes more.
// What is not caught: other transformations (reversal, hashing, encryption, base64
// of an already escaped form, case folding beyond ASCII), which is why a secret's
// hosts must be servers trusted with it.

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

// fold is how a byte is compared: ASCII case folded, and "+" read as the space a
// form's encoding writes it for (alike in the text and in the secret, so a secret
// holding "+" still matches itself).
func fold(c byte) byte {
	if c == '+' {
		return ' '
	}
	return lowerASCII(c)
}

// percentAt reads a percent escape at s[i:], encoded once or more ("%41", "%2541",
// "%252541"): the byte, and the end of the escape.
func percentAt(s string, i int) (byte, int, bool) {
	if s[i] != '%' {
		return 0, 0, false
	}
	j := i + 1
	// "%25" followed by an escape's two hex digits is that escape, encoded again.
	for j+3 < len(s) && s[j] == '2' && s[j+1] == '5' && isHex(s[j+2]) && isHex(s[j+3]) {
		j += 2
	}
	if j+1 >= len(s) {
		return 0, 0, false
	}
	h, ok1 := unhex(s[j])
	l, ok2 := unhex(s[j+1])
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return h<<4 | l, j + 2, true
}

func isHex(c byte) bool {
	_, ok := unhex(c)
	return ok
}

// needles are the byte strings, folded, whose finding in the read text is a spelling
// of v: the value itself, and the parts of its base64 encodings that the value alone
// determines, at each of the three offsets it can have in encoded text, in both
// alphabets. The characters on either side of a base64 part carry bits of the value
// too; a match takes them in (see widen).
func (r redaction) needles() []needle {
	out := []needle{{text: foldAll([]byte(r.value))}}
	n := len(r.value)
	if n < minBase64Value {
		return out
	}
	for k := 0; k < 3; k++ {
		src := append(make([]byte, k), r.value...)
		enc := base64.RawStdEncoding.EncodeToString(src)
		// Character j holds bits [6j, 6j+6); the value's are [8k, 8(k+n)).
		from, to := (8*k+5)/6, 8*(k+n)/6
		core := enc[from:to]
		out = append(out, needle{text: foldAll([]byte(core)), base64: true})
		url := strings.NewReplacer("+", "-", "/", "_").Replace(core)
		if url != core {
			out = append(out, needle{text: foldAll([]byte(url)), base64: true})
		}
	}
	return out
}

// minBase64Value is the shortest value whose base64 forms are searched for: shorter
// ones leave too few characters that are the value's alone.
const minBase64Value = 6

type needle struct {
	text   []byte
	base64 bool
}

func foldAll(b []byte) []byte {
	for i := range b {
		b[i] = fold(b[i])
	}
	return b
}

// base64Char says whether c, folded, is a character of base64 text ("+" reads as a
// space; widen checks how it was written).
func base64Char(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '/' || c == '-' || c == '_'
}

func readSpellings(s string) spelled {
	sp := spelled{read: make([]byte, 0, len(s)), unit: make([][2]int, 0, len(s))}
	emit := func(b []byte, start, end int) {
		for _, c := range b {
			sp.read = append(sp.read, fold(c))
			sp.unit = append(sp.unit, [2]int{start, end})
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if b, end, ok := percentAt(s, i); ok {
			emit([]byte{b}, i, end)
			i = end
			continue
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

// widen takes in the base64 characters on either side of the read span [a, z] of s
// that carry the rest of a value's bits (one each side at most), and its padding.
func (sp spelled) widen(s string, a, z int) (int, int) {
	// read[i] is one unit of its own, and a base64 character (a space only when it
	// was written "+").
	b64 := func(i int) bool {
		if (i > 0 && sp.unit[i-1] == sp.unit[i]) || (i < len(sp.read)-1 && sp.unit[i+1] == sp.unit[i]) {
			return false
		}
		if c := sp.read[i]; c == ' ' {
			return s[sp.unit[i][0]] == '+'
		}
		return base64Char(sp.read[i])
	}
	if a > 0 && b64(a-1) {
		a--
	}
	if z+1 < len(sp.read) && b64(z+1) {
		z++
	}
	for z+1 < len(sp.read) && sp.read[z+1] == '=' {
		z++
	}
	return a, z
}

// plainSpelling is s read as it is written, folded only: one unit per byte.
func plainSpelling(s string) spelled {
	sp := spelled{read: make([]byte, len(s)), unit: make([][2]int, len(s))}
	for i := 0; i < len(s); i++ {
		sp.read[i] = fold(s[i])
		sp.unit[i] = [2]int{i, i + 1}
	}
	return sp
}

// redactString replaces every spelling of every value in s with the value's
// placeholder.
func redactString(s string, values []redaction) string {
	if len(values) == 0 || s == "" {
		return s
	}
	// The text is read through its spellings, and also as it is written: a value
	// that itself looks like an escape ("%41…") is its own spelling.
	reads := []spelled{readSpellings(s)}
	if strings.ContainsAny(s, "%\\") {
		reads = append(reads, plainSpelling(s))
	}
	type hit struct {
		start, end int
		r          redaction
	}
	var hits []hit
	needles := make([][]needle, len(values))
	for i, v := range values {
		needles[i] = v.needles()
	}
	for _, sp := range reads {
		for i, v := range values {
			for _, nd := range needles[i] {
				if len(nd.text) == 0 {
					continue
				}
				for from := 0; from+len(nd.text) <= len(sp.read); {
					j := bytes.Index(sp.read[from:], nd.text)
					if j < 0 {
						break
					}
					a, z := from+j, from+j+len(nd.text)-1
					// A match starts and ends on whole units: never inside one escape.
					if (a == 0 || sp.unit[a-1] != sp.unit[a]) && (z == len(sp.read)-1 || sp.unit[z+1] != sp.unit[z]) {
						if nd.base64 {
							a, z = sp.widen(s, a, z)
						}
						hits = append(hits, hit{sp.unit[a][0], sp.unit[z][1], v})
						from = z + 1
						continue
					}
					from = a + 1
				}
			}
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
