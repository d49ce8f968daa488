package jsonexact

import "testing"

// TestEqualAndDiff: "expected is exact JSON equality" — numbers by value, member order
// irrelevant, types exact — and the first difference is named by its JSON path.
func TestEqualAndDiff(t *testing.T) {
	cases := []struct {
		rule, a, b string
		path       string // "" when equal
	}{
		{"numbers compare by value", `{"n":1}`, `{"n":1.0}`, ""},
		{"exponent forms are the same number", `[100]`, `[1e2]`, ""},
		{"zero has one value", `[0]`, `[-0.0]`, ""},
		{"member order is irrelevant", `{"a":1,"b":2}`, `{"b":2,"a":1}`, ""},
		{"beyond float64: 2^53+1 differs from 2^53", `[9007199254740993]`, `[9007199254740992]`, "$[0]"},
		{"a number is not its string", `{"n":1}`, `{"n":"1"}`, "$.n"},
		{"a missing member", `{"a":1,"b":2}`, `{"a":1}`, "$.b"},
		{"an extra member", `{"a":1}`, `{"a":1,"z":null}`, "$.z"},
		{"array lengths", `[1,2]`, `[1,2,3]`, "$"},
		{"nested path with a non-identifier key", `{"x y":[{"k":true}]}`, `{"x y":[{"k":false}]}`, `$["x y"][0].k`},
		{"null is not false", `[null]`, `[false]`, "$[0]"},
	}
	for _, tc := range cases {
		a, err := DecodeAny([]byte(tc.a), 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeAny([]byte(tc.b), 0)
		if err != nil {
			t.Fatal(err)
		}
		path, what, same := Diff(a, b)
		if same != (tc.path == "") || path != tc.path {
			t.Errorf("%s: Diff(%s, %s) = %q %q %v, want path %q", tc.rule, tc.a, tc.b, path, what, same, tc.path)
		}
	}
}

// TestDecodeExact: duplicate keys, invalid UTF-8, trailing data and excessive nesting
// are refused.
func TestDecodeExact(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, "\"\xff\"", `{} {}`, `[[[[1]]]]`, `{"a":`} {
		if _, err := Decode([]byte(in), 3); err == nil {
			t.Errorf("Decode(%q) accepted", in)
		}
	}
	if _, err := Decode([]byte(`[[[1]]]`), 3); err != nil {
		t.Errorf("depth 3: %v", err)
	}
}

// TestLoneSurrogate: exact decoding means "valid UTF-8"; an escape of half a
// surrogate pair names no character (encoding/json would decode it as U+FFFD, a
// different string than was sent), so it is refused; a whole pair is a character.
func TestLoneSurrogate(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`"\ud83d\ude00"`, true},
		{`"\u00e9"`, true},
		{`"\\udc00"`, true}, // an escaped backslash, then text
		{`"\ud800"`, false},
		{`"\udc00"`, false},
		{`"\ud800x"`, false},
		{`"\ud800\u0041"`, false},
		{`{"\udfff":1}`, false},
		{`["a","\\\udc00"]`, false},
	} {
		_, err := Decode([]byte(c.in), 0)
		if (err == nil) != c.ok {
			t.Errorf("Decode(%s): %v, want ok=%v", c.in, err, c.ok)
		}
	}
}
