package jsonexact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// referenceDecode is the decoder internal/jsonv used before the exact decoders became
// one: encoding/json's tokenizer plus the checks it lacks. It stays as the independent
// implementation Decode is compared with. It parses data as exactly one JSON value: objects become map[string]any, arrays
// []any, numbers json.Number.
func referenceDecode(data []byte, maxDepth int) (any, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	if at := loneSurrogate(data); at >= 0 {
		// encoding/json would decode it as U+FFFD: a different string than was sent.
		return nil, fmt.Errorf("invalid UTF-8: lone surrogate escape at byte %d", at)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := value(dec, 0, maxDepth)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// loneSurrogate returns the offset of the first \\u escape of a UTF-16 surrogate that
// is not half of a high-low pair, or -1. A string escape that names no Unicode
// character cannot be decoded exactly.
func loneSurrogate(data []byte) int {
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '"':
			in = !in
		case c == '\\' && in && i+1 < len(data):
			if data[i+1] != 'u' {
				i++ // the escaped byte, a quote perhaps
				continue
			}
			r := refHex4(data, i+2)
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
					return i
				}
				if r2 := refHex4(data, i+8); r2 < 0xdc00 || r2 > 0xdfff {
					return i
				}
				i += 11
			case r >= 0xdc00 && r <= 0xdfff:
				return i
			default:
				i += 5
			}
		}
	}
	return -1
}

// hex4 is the value of the four hex digits at data[at:], or -1.
func refHex4(data []byte, at int) rune {
	if at+4 > len(data) {
		return -1
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

func value(dec *json.Decoder, depth, maxDepth int) (any, error) {
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, errors.New("unexpected end of JSON")
	}
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d levels", maxDepth)
	}
	switch d {
	case '{':
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := obj[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			v, err := value(dec, depth+1, maxDepth)
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
			v, err := value(dec, depth+1, maxDepth)
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
	return nil, fmt.Errorf("unexpected %v", d)
}
