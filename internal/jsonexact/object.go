package jsonexact

import (
	"bytes"
	"encoding/json"
	"errors"
)

// SplitObject checks that data is exactly one JSON object by Decode's rules (valid
// UTF-8, no lone surrogate escape, no duplicate key at any depth, nesting within
// maxDepth, nothing after it) and returns its compact form with the raw value of each
// top-level key. The compact form is encoding/json's Compact of data: escapes stay as
// written, so what a caller hashes is the text it was given, less white space. The raw
// values are compact too and share the returned compact bytes.
func SplitObject(data []byte, maxDepth int) (compact []byte, fields map[string]json.RawMessage, err error) {
	v, err := Decode(data, maxDepth)
	if err != nil {
		return nil, nil, err
	}
	return SplitDecoded(v, data)
}

// SplitDecoded is SplitObject for data that Decode has already turned into v: it
// checks and parses nothing again (a caller that decoded a call's arguments once
// hands the value down with its text).
func SplitDecoded(v Value, data []byte) (compact []byte, fields map[string]json.RawMessage, err error) {
	if v.Kind != Object {
		return nil, nil, errors.New("not a JSON object")
	}
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, err
	}
	c := buf.Bytes()
	fields = make(map[string]json.RawMessage, len(v.O))
	// The members are in wire order, and c is valid compact JSON: after each key's
	// closing quote comes ':', after each value ',' or the final '}'.
	i := 1
	for _, m := range v.O {
		i = skipString(c, i) + 1 // past ':'
		end := skipValue(c, i)
		fields[m.Key] = json.RawMessage(c[i:end:end])
		i = end + 1 // past ','
	}
	return c, fields, nil
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

// FieldString returns the value of a top-level string field of SplitObject's fields,
// ok=false if absent or not a string.
func FieldString(fields map[string]json.RawMessage, name string) (s string, ok bool) {
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

// SplitDecodedArray is SplitDecoded for an array: data, which Decode has already
// turned into v, split into the compact raw text of each element (escapes as written).
// It checks and parses nothing again.
func SplitDecodedArray(v Value, data []byte) ([]json.RawMessage, error) {
	if v.Kind != Array {
		return nil, errors.New("not a JSON array")
	}
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	c := buf.Bytes()
	out := make([]json.RawMessage, len(v.A))
	i := 1 // past '['
	for k := range v.A {
		end := skipValue(c, i)
		out[k] = json.RawMessage(c[i:end:end])
		i = end + 1 // past ','
	}
	return out, nil
}
