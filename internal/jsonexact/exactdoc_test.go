package jsonexact

import (
	"errors"
	"strings"
	"testing"
)

// "A Doc is a JSON text known to be exact because this package made it": whatever
// Encode accepts, Decode accepts and reads back as the same value, without Encode
// parsing anything.
func TestEncodeWritesWhatDecodeAccepts(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `null`, `true`, `-0.5e+10`, `"a\u0000\"\\\n"`,
		`{"a":[1,{"b":"é","c":null}],"d":9007199254740993,"e":1.000}`,
		`{"\u0061b":1,"ab2":2}`,
	} {
		v, err := Decode([]byte(in), 0)
		if err != nil {
			t.Fatal(err)
		}
		before := Decodes()
		d, err := Encode(v, 0)
		if err != nil {
			t.Fatalf("Encode(Decode(%s)): %v", in, err)
		}
		if Decodes() != before {
			t.Fatalf("Encode parsed a document")
		}
		back, err := Decode([]byte(d.Text()), 0)
		if err != nil {
			t.Fatalf("Encode wrote %s, which Decode refuses: %v", d.Text(), err)
		}
		if string(back.Canonical()) != string(v.Canonical()) {
			t.Fatalf("round trip changed %s into %s", v.Canonical(), back.Canonical())
		}
		dd, err := DecodeDoc([]byte(in), 0)
		if err != nil || dd.Text() != d.Text() {
			t.Fatalf("DecodeDoc(%s) = %q, %v; Encode wrote %q", in, dd.Text(), err, d.Text())
		}
		if dd.Depth() != d.Depth() || d.Depth() != depthOf(&v) {
			t.Fatalf("depth of %s: DecodeDoc %d, Encode %d, walk %d", in, dd.Depth(), d.Depth(), depthOf(&v))
		}
	}
}

// Encode checks each rule of exact JSON on a Value built by hand, so a Doc can never
// hold what Decode would refuse.
func TestEncodeRefusesWhatDecodeRefuses(t *testing.T) {
	deep := Value{Kind: Array, A: []Value{}}
	for range DefaultMaxDepth {
		deep = Value{Kind: Array, A: []Value{deep}}
	}
	many := make([]Member, 40)
	for i := range many {
		many[i] = Member{Key: strings.Repeat("k", i+1), Val: Int(int64(i))}
	}
	many = append(many, Member{Key: "kkk", Val: Value{Kind: Null}})
	for _, c := range []struct {
		rule string
		v    Value
	}{
		{"duplicate keys are rejected", Obj(Member{"a", Int(1)}, Member{"a", Int(2)})},
		{"duplicate keys are rejected in a large object too", Obj(many...)},
		{"nested duplicate keys are rejected", Obj(Member{"x", Obj(Member{"a", Int(1)}, Member{"a", Int(2)})})},
		{"invalid UTF-8 is rejected in a string", Value{Kind: String, S: "\xff"}},
		{"invalid UTF-8 is rejected in a key", Obj(Member{"\xff", Value{Kind: Null}})},
		{"numbers follow the JSON grammar", Value{Kind: Number, S: "01"}},
		{"numbers follow the JSON grammar: no bare point", Value{Kind: Number, S: "1."}},
		{"numbers follow the JSON grammar: not NaN", Value{Kind: Number, S: "NaN"}},
		{"numbers follow the JSON grammar: not empty", Value{Kind: Number}},
		{"nesting is bounded", deep},
		{"kinds are known", Value{Kind: Object + 1}},
	} {
		t.Run(c.rule, func(t *testing.T) {
			if d, err := Encode(c.v, 0); err == nil {
				t.Fatalf("Encode accepted %q", d.Text())
			} else if !errors.Is(err, errNotExact) {
				t.Fatalf("error %v does not say the value is not exact", err)
			}
		})
	}
}

// Str makes host text valid UTF-8 as encoding/json does (one U+FFFD per invalid byte),
// so that a route name or a message always encodes.
func TestStrCoercesInvalidUTF8(t *testing.T) {
	if got := Str("a\xff\xfeb").S; got != "a\uFFFD\uFFFDb" {
		t.Fatalf("Str = %q", got)
	}
	d, err := Encode(Obj(Member{"s", Str("\xff")}, Member{"n", Int(-3)}, Member{"b", Boolean(true)}, Member{"l", Strs([]string{"x"})}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Text() != `{"s":"`+"\uFFFD"+`","n":-3,"b":true,"l":["x"]}` {
		t.Fatalf("Encode wrote %s", d.Text())
	}
	if s, ok := d.String("s"); !ok || s != "\uFFFD" {
		t.Fatalf("String(s) = %q, %v", s, ok)
	}
	if _, ok := d.String("n"); ok {
		t.Fatal("String of a number member reports a string")
	}
	if !d.Has("n") || d.Has("zz") {
		t.Fatal("Has is wrong")
	}
}

// Depth is the nesting a reader with a tighter bound checks: 0 for a scalar, 1 for a
// flat container, as Decode counts it.
func TestDocDepth(t *testing.T) {
	for in, want := range map[string]int{`1`: 0, `[]`: 1, `{"a":[1,[2]]}`: 3, `[{},[[]]]`: 3} {
		d, err := DecodeDoc([]byte(in), 0)
		if err != nil || d.Depth() != want {
			t.Fatalf("Depth(%s) = %d, %v; want %d", in, d.Depth(), err, want)
		}
		if _, err := Decode([]byte(in), max(want, 1)); err != nil {
			t.Fatalf("Decode refuses %s at its own depth %d: %v", in, want, err)
		}
		if want > 1 {
			if _, err := Decode([]byte(in), want-1); err == nil {
				t.Fatalf("Decode accepts %s at depth %d, below its Depth %d", in, want-1, want)
			}
		}
	}
}

func TestZeroDoc(t *testing.T) {
	var d Doc
	if !d.IsZero() {
		t.Fatal("the zero Doc is not zero")
	}
	if e, _ := Encode(Obj(), 0); e.IsZero() || e.Text() != "{}" {
		t.Fatalf("Encode({}) = %q", e.Text())
	}
}
