package jsonexact

import "testing"

// Protocol-diagnostics Skill: "Numbers keep their exact spelling (2^53+1 stays exact)."
// Where a number must become a double (a JIT tool's arguments and syscall results),
// Inexact finds the ones that would change, with their JSON Pointer.
func TestInexact(t *testing.T) {
	for _, tc := range []struct {
		doc, ptr, num, became string
	}{
		{`{"n":9007199254740993}`, "/n", "9007199254740993", "9007199254740992"},
		{`{"a":[1,2,{"b/c":[0.5,-9007199254740995]}]}`, "/a/2/b~1c/1", "-9007199254740995", "-9007199254740996"},
		{`{"x~":1e400}`, "/x~0", "1e400", "Infinity"},
		{`{"tiny":1e-400}`, "/tiny", "1e-400", "0"},
		{`{"s":"9007199254740993","p":0.30000000000000000001}`, "/p", "0.30000000000000000001", "0.3"},
		{`[123456789012345678901234567890]`, "/0", "123456789012345678901234567890", "1.2345678901234568e+29"},
		{`{"n":9007199254740993}` + "\n", "/n", "9007199254740993", "9007199254740992"},
		{`{"n":1.00000000000000000001e-7}`, "/n", "1.00000000000000000001e-7", "1e-7"},
	} {
		ptr, num, became, found := Inexact([]byte(tc.doc))
		if !found || ptr != tc.ptr || num != tc.num || became != tc.became {
			t.Errorf("%s: %q %q %q %v, want %q %q %q", tc.doc, ptr, num, became, found, tc.ptr, tc.num, tc.became)
		}
		// InexactValue, for a value already decoded, finds the same number at the same
		// place without parsing the text.
		v, err := Decode([]byte(tc.doc), 0)
		if err != nil {
			t.Fatal(err)
		}
		before := Decodes()
		ptr, num, became, found = InexactValue(v, []byte(tc.doc))
		if Decodes() != before {
			t.Errorf("%s: InexactValue parsed the document", tc.doc)
		}
		if !found || ptr != tc.ptr || num != tc.num || became != tc.became {
			t.Errorf("InexactValue %s: %q %q %q %v, want %q %q %q", tc.doc, ptr, num, became, found, tc.ptr, tc.num, tc.became)
		}
	}
	for _, doc := range []string{
		`{"n":9007199254740992,"m":-9007199254740991,"f":0.1,"e":1e300,"z":-0,"g":1.5e-300}`,
		`{"s":"123456789012345678901234567890 1e400"}`,
		`{"esc":"\"9007199254740993","k":[true,false,null]}`,
		`{"pi":3.141592653589793,"long":1.00000000000000000000}`,
		`{}`,
	} {
		if ptr, num, _, found := Inexact([]byte(doc)); found {
			t.Errorf("%s: %s at %s reported; every number survives a double", doc, num, ptr)
		}
		v, err := Decode([]byte(doc), 0)
		if err != nil {
			t.Fatal(err)
		}
		if ptr, num, _, found := InexactValue(v, []byte(doc)); found {
			t.Errorf("InexactValue %s: %s at %s reported; every number survives a double", doc, num, ptr)
		}
	}
}
