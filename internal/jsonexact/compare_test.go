package jsonexact

import (
	"strings"
	"testing"
)

func TestEqual(t *testing.T) {
	cases := []struct {
		rule string
		a, b string
		want bool
	}{
		{"key order is irrelevant", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{"numbers compare by value, not text: 1 = 1.0", `1`, `1.0`, true},
		{"numbers compare by value: 100 = 1e2 = 1E+2 = 0.1e3", `100`, `1e2`, true},
		{"numbers compare by value: 1E+2", `100`, `1E+2`, true},
		{"numbers compare by value: 0.1e3", `100`, `0.1e3`, true},
		{"-0 equals 0", `-0`, `0.0`, true},
		{"2^53+1 is not 2^53 (no float64 round trip)", `9007199254740993`, `9007199254740992`, false},
		{"tiny differences count", `0.30000000000000004`, `0.3`, false},
		{"sign counts", `-1`, `1`, false},
		{"types count: string vs number", `"1"`, `1`, false},
		{"types count: null vs false", `null`, `false`, false},
		{"types count: [] vs {}", `[]`, `{}`, false},
		{"array order counts", `[1,2]`, `[2,1]`, false},
		{"array length counts", `[1]`, `[1,1]`, false},
		{"an extra key counts", `{"a":1}`, `{"a":1,"b":null}`, false},
		{"nesting counts", `{"a":{"b":1}}`, `{"a":{"b":1.0}}`, true},
		{"strings compare exactly", `"a"`, `"A"`, false},
		{"escapes are decoded before comparing", `"\u0041"`, `"A"`, true},
		{"a hostile exponent costs nothing and compares exactly", `1e999999999999`, `10e999999999998`, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := EqualJSON([]byte(tc.a), []byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Equal(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if back, _ := EqualJSON([]byte(tc.b), []byte(tc.a)); back != got {
				t.Fatalf("Equal is not symmetric on %s, %s", tc.a, tc.b)
			}
		})
	}
}

func TestDecodeStrict(t *testing.T) {
	bad := []struct{ rule, in, has string }{
		{"duplicate keys are rejected", `{"a":1,"a":2}`, "duplicate"},
		{"nested duplicate keys are rejected", `{"x":{"a":1,"a":2}}`, "duplicate"},
		{"invalid UTF-8 is rejected", "\"\xff\"", "UTF-8"},
		{"trailing data is rejected", `{} {}`, "unexpected data after"},
		{"nesting is bounded", strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), "nesting"},
		{"empty input is rejected", ``, "end"},
	}
	for _, tc := range bad {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := DecodeAny([]byte(tc.in), 0)
			if err == nil || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("Decode(%q) = %v, want an error containing %q", tc.in, err, tc.has)
			}
		})
	}
	if _, err := Decode([]byte(strings.Repeat("[", DefaultMaxDepth)+strings.Repeat("]", DefaultMaxDepth)), 0); err != nil {
		t.Fatalf("depth %d must be accepted: %v", DefaultMaxDepth, err)
	}
}

func FuzzEqualReflexive(f *testing.F) {
	for _, s := range []string{`1`, `{"a":[1,2.5e3,"x",null,true]}`, `-0.0e-0`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeAny([]byte(s), 0)
		if err != nil {
			return
		}
		if !Equal(v, v) {
			t.Fatalf("%s is not equal to itself", s)
		}
	})
}

func TestShortText(t *testing.T) {
	if got := ShortText([]byte(`{ "a" : 1 }`), 100); got != `{"a":1}` {
		t.Fatalf("Short compacts: %q", got)
	}
	if got := ShortText([]byte(`"ééééé"`), 4); got != `"é…` {
		t.Fatalf("Short cuts on a rune boundary: %q", got)
	}
}
