package jsonexact

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestDecodeProblems(t *testing.T) {
	cases := []struct {
		in   string
		want Problem
	}{
		{`{"a":1,"a":2}`, DuplicateKey},
		{`{"a":1,"\u0061":2}`, DuplicateKey},
		{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k3":0}`, DuplicateKey},
		{"\"\xff\"", InvalidUTF8},
		{`"\ud800"`, InvalidUTF8},
		{`"\udc00"`, InvalidUTF8},
		{`"\ud800\u0041"`, InvalidUTF8},
		{`[[[[`, TooDeep},
		{`{} x`, TrailingData},
		{`{`, Malformed},
		{`01`, TrailingData},
		{`-`, Malformed},
		{`1e`, Malformed},
		{`"\x"`, Malformed},
		{`tru`, Malformed},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in), 3)
		e, ok := err.(*Error)
		if !ok || e.Problem != c.want {
			t.Errorf("Decode(%q) = %v, want problem %d", c.in, err, c.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	v, err := Decode([]byte(` { "b" : [ 1.0 , "\u00e9\/" ] , "a" : {"z":null,"y":9007199254740993} } `), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v.Canonical()), `{"a":{"y":9007199254740993,"z":null},"b":[1.0,"é/"]}`; got != want {
		t.Fatalf("canonical %s, want %s", got, want)
	}
	if got, want := string(v.Compact()), `{"b":[1.0,"é/"],"a":{"z":null,"y":9007199254740993}}`; got != want {
		t.Fatalf("compact %s, want %s", got, want)
	}
}

// FuzzDecode runs every input three ways, through Decode, through referenceDecode (the
// encoding/json-based exact decoder this one replaced) and through encoding/json, and
// compares: both exact decoders accept and refuse the same inputs with the same value,
// whatever Decode accepts encoding/json accepts with the same value, and its canonical
// text is a fixed point.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"\ud83d\ude00"`, `9007199254740993`, `[1e400,-0.0]`, `{"a":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data, 32)
		ref, rerr := referenceDecode(data, 32)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Decode(%q) = %v, the reference decoder says %v", data, err, rerr)
		}
		if err != nil {
			return
		}
		if !Equal(v.ToAny(), ref) {
			t.Fatalf("Decode(%q) and the reference decoder see different values", data)
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("Decode accepted %q, which is not valid UTF-8 JSON", data)
		}
		canon := v.Canonical()
		w, err := Decode(canon, 32)
		if err != nil || !bytes.Equal(w.Canonical(), canon) || !Equal(v.ToAny(), w.ToAny()) {
			t.Fatalf("canonical text %q is not a fixed point (%v)", canon, err)
		}
		var a, b any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		dec = json.NewDecoder(bytes.NewReader(canon))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			t.Fatal(err)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("encoding/json sees a different value after canonicalisation: %s vs %s", ja, jb)
		}
	})
}
