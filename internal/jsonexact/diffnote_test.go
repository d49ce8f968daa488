package jsonexact

import "testing"

// "A test that can never pass says why": an expected value holding a number no
// JavaScript number equals still fails as a mismatch, and DiffNote names the number,
// where it is, and what JavaScript reads it as; it says nothing when every number of
// the expected value is a double's.
func TestDiffNote(t *testing.T) {
	for _, c := range []struct{ want, note string }{
		{`9007199254740993`, "no JavaScript number is 9007199254740993: JavaScript reads it as 9007199254740992; no program can return it"},
		{`0.10000000000000001`, "no JavaScript number is 0.10000000000000001: JavaScript reads it as 0.1; no program can return it"},
		{`1e400`, "no JavaScript number is 1e400: it overflows a double, and JavaScript reads it as Infinity, which is not JSON; no program can return it"},
		{`-1E+400`, "no JavaScript number is -1E+400: it overflows a double, and JavaScript reads it as -Infinity, which is not JSON; no program can return it"},
		{`1e-400`, "no JavaScript number is 1e-400: it is below the smallest double, and JavaScript reads it as 0; no program can return it"},
		{`-1e-400`, "no JavaScript number is -1e-400: it is below the smallest double, and JavaScript reads it as 0; no program can return it"},
		// The first one in Diff's order (keys sorted), with its path.
		{`{"z":1e400,"b":[1,{"a b":9007199254740993}]}`, `no JavaScript number is 9007199254740993 (at $.b[1]["a b"]): JavaScript reads it as 9007199254740992; no program can return it`},
		{`[0.5,{"n":123456789012345678901234567890}]`, "no JavaScript number is 123456789012345678901234567890 (at $[1].n): JavaScript reads it as 1.2345678901234568e+29; no program can return it"},
		// Every number here is a double's, whatever its spelling.
		{`{"a":[0.1,1e300,-0,9007199254740992,1.50,5e-324,"9007199254740993"],"b":1E2}`, ""},
		{`null`, ""},
	} {
		want, err := DecodeAny([]byte(c.want), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := DiffNote(want); got != c.note {
			t.Errorf("DiffNote(%s) = %q\n want %q", c.want, got, c.note)
		}
	}
}
