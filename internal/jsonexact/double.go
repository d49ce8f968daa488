package jsonexact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// MaxSafeInteger is the largest integer n such that every integer in [-n, n] is a
// float64 (2^53 − 1, JavaScript's Number.MAX_SAFE_INTEGER).
const MaxSafeInteger = 1<<53 - 1

// Inexact finds the first number of data, in document order, whose decimal value a
// float64 does not hold exactly: what a JavaScript program would see differs from what
// was sent (9007199254740993 reads as 9007199254740992, 1e400 as Infinity). It returns
// the number's JSON Pointer, its text and the float64's text; found is false when every
// number survives. data must be valid JSON. 0.1 survives: its shortest float64 text is
// the same decimal.
func Inexact(data []byte) (ptr, num, became string, found bool) {
	// Most documents hold only short numbers: one pass over the bytes proves them exact,
	// and only a document with a suspect number is decoded to name its place.
	if !hasSuspect(data) {
		return "", "", "", false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	ptr, num, became, found = inexactIn(dec, "")
	return
}

// hasSuspect reports whether data holds a number, outside strings, that may not
// survive a float64: one of more than 15 characters or with an exponent. A decimal of
// at most 15 significant digits within the float64 range always survives.
func hasSuspect(data []byte) bool {
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(data) && strings.IndexByte("+-.0123456789eE", data[j]) >= 0 {
				j++
			}
			tok := data[i:j]
			if len(tok) > 15 || bytes.ContainsAny(tok, "eE") {
				if !exact(string(tok)) {
					return true
				}
			}
			i = j - 1
		}
	}
	return false
}

// exact reports whether the number text's decimal value is a float64's.
func exact(tok string) bool {
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return false // out of range: ±Inf
	}
	return NumberEqual(tok, strconv.FormatFloat(f, 'g', -1, 64))
}

// became is the number a JavaScript program sees for tok, as JavaScript prints it.
func became(tok string) string {
	f, _ := strconv.ParseFloat(tok, 64)
	switch a := math.Abs(f); {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case a == 0 || (a >= 1e-6 && a < 1e21):
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}

// inexactIn walks one value of dec, at pointer ptr.
func inexactIn(dec *json.Decoder, ptr string) (string, string, string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", "", "", false
	}
	switch t := tok.(type) {
	case json.Number:
		if !exact(string(t)) {
			return ptr, string(t), became(string(t)), true
		}
	case json.Delim:
		switch t {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", "", "", false
				}
				k, _ := kt.(string)
				if p, n, b, ok := inexactIn(dec, ptr+"/"+EscapePointer(k)); ok {
					return p, n, b, ok
				}
			}
			dec.Token() // '}'
		case '[':
			for i := 0; dec.More(); i++ {
				if p, n, b, ok := inexactIn(dec, ptr+"/"+strconv.Itoa(i)); ok {
					return p, n, b, ok
				}
			}
			dec.Token() // ']'
		}
	}
	return "", "", "", false
}

// InexactValue is Inexact for a value already decoded (v, whose compact or original
// text is data): it parses nothing. data lets the common case, no suspect number at
// all, be proved by the same byte scan; only then is v walked, in document order.
func InexactValue(v Value, data []byte) (ptr, num, became string, found bool) {
	if !hasSuspect(data) {
		return "", "", "", false
	}
	return inexactValue(&v, "")
}

func inexactValue(v *Value, ptr string) (string, string, string, bool) {
	switch v.Kind {
	case Number:
		if !exact(v.S) {
			return ptr, v.S, became(v.S), true
		}
	case Object:
		for i := range v.O {
			if p, n, b, ok := inexactValue(&v.O[i].Val, ptr+"/"+EscapePointer(v.O[i].Key)); ok {
				return p, n, b, ok
			}
		}
	case Array:
		for i := range v.A {
			if p, n, b, ok := inexactValue(&v.A[i], ptr+"/"+strconv.Itoa(i)); ok {
				return p, n, b, ok
			}
		}
	}
	return "", "", "", false
}

// DiffNote explains why a value can never equal want when want, an expected value in
// DecodeAny's shape, holds a number no JavaScript number equals: one a double holds
// only rounded (9007199254740993, 0.10000000000000001) or not at all (1e400, which
// overflows; 1e-400, which underflows to 0). A test that expects it fails whatever the
// program does; the note, added to the mismatch, says so. It names the first such
// number in the order Diff walks want, with its path when it is not the root, and
// what JavaScript reads it as. It is "" when every number of want is a double's.
func DiffNote(want any) string {
	var p strings.Builder
	p.WriteString("$")
	num, ok := firstInexact(&p, want)
	if !ok {
		return ""
	}
	at := ""
	if p.Len() > 1 {
		at = " (at " + p.String() + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no JavaScript number is %s%s: ", num, at)
	f, _ := strconv.ParseFloat(num, 64)
	switch {
	case math.IsInf(f, 0):
		b.WriteString("it overflows a double, and JavaScript reads it as ")
		b.WriteString(became(num))
		b.WriteString(", which is not JSON")
	case f == 0:
		b.WriteString("it is below the smallest double, and JavaScript reads it as 0")
	default:
		b.WriteString("JavaScript reads it as ")
		b.WriteString(became(num))
	}
	b.WriteString("; no program can return it")
	return b.String()
}

// firstInexact finds the first number of v, in Diff's order (object keys sorted),
// that a double does not hold exactly, and leaves its path in p.
func firstInexact(p *strings.Builder, v any) (string, bool) {
	switch w := v.(type) {
	case json.Number:
		if !exact(string(w)) {
			return string(w), true
		}
	case []any:
		for i := range w {
			mark := p.Len()
			fmt.Fprintf(p, "[%d]", i)
			if n, ok := firstInexact(p, w[i]); ok {
				return n, true
			}
			truncate(p, mark)
		}
	case map[string]any:
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			mark := p.Len()
			writeKey(p, k)
			if n, ok := firstInexact(p, w[k]); ok {
				return n, true
			}
			truncate(p, mark)
		}
	}
	return "", false
}
