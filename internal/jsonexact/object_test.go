package jsonexact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// reference is the straightforward form of SplitObject (referenceDecode's checks, then
// a json.Decoder walking the tokens); the decoder and the one-pass scanner must agree
// with it on every input.
func reference(data []byte) ([]byte, map[string]json.RawMessage, error) {
	if _, err := referenceDecode(data, 0); err != nil {
		return nil, nil, err
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
	fields := map[string]json.RawMessage{}
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
			return nil, nil, errors.New("duplicate key")
		}
		var cv bytes.Buffer
		if err := json.Compact(&cv, v); err != nil {
			return nil, nil, err
		}
		fields[k] = cv.Bytes()
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("trailing data")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), fields, nil
}

var cases = []struct{ name, in string }{
	// "exactly one JSON object": everything else is refused.
	{"empty object", `{}`},
	{"empty object with spaces", " { \n } "},
	{"one string field", `{"call_id":"c1"}`},
	{"spaced fields", ` { "a" : 1 , "b" : [ 1 , { "c" : "}" } ] , "d":null } `},
	{"nested braces and brackets in strings", `{"a":"{[,]}\"","b":{"x":[[],{}]},"c":"\\"}`},
	{"escaped keys", `{"\u0061":1,"b\"":2,"c\\":3}`},
	{"numbers and literals", `{"n":-1.5e+10,"t":true,"f":false,"z":null}`},
	{"unicode", `{"é":"日本","emoji":"\ud83d\ude00"}`},
	{"lone surrogate key", `{"\ud800":1}`},
	// "top-level keys are unique (matched byte for byte)"
	{"duplicate key", `{"a":1,"a":2}`},
	{"duplicate after unescaping", `{"a":1,"\u0061":2}`},
	{"keys differing in case are distinct", `{"a":1,"A":2}`},
	{"a duplicate nested key is refused too", `{"a":{"b":1,"b":2}}`},
	{"a lone surrogate in a nested value", `{"a":["\udc00"]}`},
	{"a surrogate pair", `{"a":"\ud83d\ude00"}`},
	// not an object, malformed, trailing data
	{"array", `[1,2]`},
	{"string", `"x"`},
	{"null", `null`},
	{"number", `1`},
	{"empty input", ``},
	{"truncated", `{"a":1`},
	{"trailing object", `{} {}`},
	{"trailing comma", `{"a":1,}`},
	{"invalid utf8", "{\"a\":\"\xff\"}"},
}

// TestObjectMatchesReference checks the rule of SplitObject's doc comment: exactly one
// object by Decode's rules; compact form and raw values as the
// decoder-based reference computes them.
func TestObjectMatchesReference(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { same(t, []byte(tc.in)) })
	}
}

func FuzzObjectMatchesReference(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(same)
}

func same(t *testing.T, in []byte) {
	wc, wf, werr := reference(in)
	gc, gf, gerr := SplitObject(in, 0)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("SplitObject(%q) error = %v, reference error = %v", in, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(gc, wc) {
		t.Fatalf("SplitObject(%q) compact = %q, want %q", in, gc, wc)
	}
	if len(gf) != len(wf) {
		t.Fatalf("SplitObject(%q) fields = %q, want %q", in, gf, wf)
	}
	for k, v := range wf {
		if !bytes.Equal(gf[k], v) {
			t.Fatalf("SplitObject(%q) field %q = %q, want %q", in, k, gf[k], v)
		}
		var ws string
		wok := json.Unmarshal(v, &ws) == nil
		gs, gok := FieldString(gf, k)
		if gok != wok || gs != ws {
			t.Fatalf("FieldString(%q) = %q, %v; want %q, %v", k, gs, gok, ws, wok)
		}
	}
}
