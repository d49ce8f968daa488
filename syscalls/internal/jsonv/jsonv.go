// Package jsonv decodes JSON strictly and compares JSON values by value.
//
// Strict means: exactly one value, valid UTF-8, no duplicate object keys, bounded
// nesting, and numbers kept as their exact text (json.Number). Equal compares two
// decoded values the way the tape semantics require: types and nesting must match,
// object key order is irrelevant, and numbers compare by their decimal value, never by
// their spelling and never through float64.
package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 128

// Decode parses data as exactly one strict JSON value.
func Decode(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON")
		}
		return nil, err
	}
	return decodeToken(dec, tok, depth)
}

func decodeToken(dec *json.Decoder, tok json.Token, depth int) (any, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return nil, fmt.Errorf("nesting deeper than %d", MaxDepth)
		}
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				if _, dup := obj[k]; dup {
					return nil, fmt.Errorf("duplicate object key %q", k)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil // string, json.Number, bool, nil
	}
}

// Equal reports whether two decoded values are the same JSON value.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && NumberEqual(string(x), string(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// EqualJSON decodes both texts strictly and compares them by value.
func EqualJSON(a, b []byte) (bool, error) {
	va, err := Decode(a)
	if err != nil {
		return false, err
	}
	vb, err := Decode(b)
	if err != nil {
		return false, err
	}
	return Equal(va, vb), nil
}

// NumberEqual compares two JSON number texts by exact decimal value: "1", "1.0",
// "10e-1" and "0.1e1" are equal; "-0" equals "0". It never builds a big number, so a
// hostile exponent costs nothing.
func NumberEqual(a, b string) bool {
	na, oka := normalize(a)
	nb, okb := normalize(b)
	return oka && okb && na == nb
}

type decimal struct {
	neg    bool
	digits string // no leading or trailing zeros; empty means zero
	exp    int64  // value = 0.digits × 10^exp
}

// normalize turns JSON number text into a canonical (sign, digits, exponent).
func normalize(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if hasExp {
		sign := int64(1)
		switch {
		case strings.HasPrefix(expPart, "+"):
			expPart = expPart[1:]
		case strings.HasPrefix(expPart, "-"):
			sign = -1
			expPart = expPart[1:]
		}
		if expPart == "" {
			return d, false
		}
		for _, c := range expPart {
			if c < '0' || c > '9' {
				return d, false
			}
			if exp > 1<<40 { // saturate: beyond any JSON a decoder accepts
				continue
			}
			exp = exp*10 + int64(c-'0')
		}
		exp *= sign
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return d, false
		}
	}
	if intPart == "" {
		return d, false
	}
	all := intPart + frac
	exp += int64(len(intPart))
	trimmed := strings.TrimLeft(all, "0")
	exp -= int64(len(all) - len(trimmed))
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return decimal{}, true // zero, sign dropped
	}
	d.digits = trimmed
	d.exp = exp
	return d, true
}

// Short renders a JSON text for an error message, cut to max bytes on a rune boundary.
func Short(data []byte, max int) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		buf.Reset()
		buf.Write(data)
	}
	s := buf.String()
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
