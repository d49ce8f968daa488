package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Object checks that data is exactly one JSON object in valid UTF-8 whose top-level
// keys are unique (matched byte for byte, never case-folded), and returns its compact
// form with the raw value of each top-level key.
func Object(data []byte) (compact []byte, fields map[string]json.RawMessage, err error) {
	if !utf8.Valid(data) {
		return nil, nil, errors.New("invalid UTF-8")
	}
	if !json.Valid(data) {
		return nil, nil, errors.New("malformed JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	fields = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := fields[k]; dup {
			return nil, nil, fmt.Errorf("duplicate key %q", k)
		}
		fields[k] = v
	}
	if _, err := dec.Token(); err != nil { // closing brace
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("trailing data after object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), fields, nil
}

// String returns the value of a top-level string field, ok=false if absent or not a
// string.
func String(fields map[string]json.RawMessage, name string) (s string, ok bool) {
	raw, present := fields[name]
	if !present {
		return "", false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
