package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Object checks that data is exactly one JSON object in valid UTF-8 whose top-level
// keys are unique (matched byte for byte after unescaping, never case-folded), and
// returns its compact form with the raw value of each top-level key. The raw values
// are compact too and share the returned compact bytes.
//
// The syntax is checked by encoding/json first; the top level is then walked in one
// pass over the compact bytes, which are known to be valid JSON.
func Object(data []byte) (compact []byte, fields map[string]json.RawMessage, err error) {
	if !utf8.Valid(data) {
		return nil, nil, errors.New("invalid UTF-8")
	}
	if !json.Valid(data) {
		return nil, nil, errors.New("malformed JSON")
	}
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, err
	}
	c := buf.Bytes()
	if len(c) < 2 || c[0] != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	fields = map[string]json.RawMessage{}
	i := 1
	if c[i] == '}' {
		return c, fields, nil
	}
	for {
		// c[i] is the opening quote of a key: the input is valid, compact JSON.
		end := skipString(c, i)
		k, err := key(c[i:end])
		if err != nil {
			return nil, nil, err
		}
		i = end + 1 // past ':'
		vend := skipValue(c, i)
		if _, dup := fields[k]; dup {
			return nil, nil, fmt.Errorf("duplicate key %q", k)
		}
		fields[k] = json.RawMessage(c[i:vend:vend])
		if c[vend] == '}' {
			return c, fields, nil
		}
		i = vend + 1 // past ','
	}
}

// key decodes a quoted key; one without escapes is its bytes between the quotes.
func key(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var k string
	if err := json.Unmarshal(q, &k); err != nil {
		return "", err
	}
	return k, nil
}

// skipString returns the index just past the string whose opening quote is at c[i].
func skipString(c []byte, i int) int {
	for j := i + 1; j < len(c); j++ {
		switch c[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(c)
}

// skipValue returns the index of the ',' or '}' that ends the top-level value starting
// at c[i] in valid, compact JSON.
func skipValue(c []byte, i int) int {
	depth := 0
	for i < len(c) {
		switch c[i] {
		case '"':
			i = skipString(c, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return len(c) - 1
}

// String returns the value of a top-level string field, ok=false if absent or not a
// string.
func String(fields map[string]json.RawMessage, name string) (s string, ok bool) {
	raw, present := fields[name]
	if !present {
		return "", false
	}
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true // valid JSON: nothing to unescape
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
