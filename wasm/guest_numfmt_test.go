package wasm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// numfmtProgram formats each case the way testdata/numfmt/gen.js did in Node. x travels
// as its IEEE-754 bits, so that no decimal parsing stands between the two engines.
const numfmtProgram = `
function run(a) {
  const dv = new DataView(new ArrayBuffer(8));
  return a.cases.map(([method, hex, arg]) => {
    dv.setUint32(0, parseInt(hex.slice(0, 8), 16));
    dv.setUint32(4, parseInt(hex.slice(8), 16));
    const x = dv.getFloat64(0);
    if (method === 'String') return String(x);
    if (arg === '-') return x[method]();
    return x[method](Number(arg));
  });
}`

type numfmtCase struct {
	method, bits, arg, want string
}

func loadNumfmtCases(t *testing.T) []numfmtCase {
	t.Helper()
	f, err := os.Open("testdata/numfmt/cases.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []numfmtCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 4 {
			t.Fatalf("cases.tsv: bad line %q", sc.Text())
		}
		cases = append(cases, numfmtCase{parts[0], parts[1], parts[2], parts[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestGuestNumberFormatting checks the guest against a corpus generated with Node:
// "toFixed, toPrecision, toExponential, toString, String(n) must match Node exactly",
// including exact ties, which JavaScript rounds up ("if there are two such n, pick the
// larger n") where printf rounds them to even, and Number::toString's shortest round trip.
func TestGuestNumberFormatting(t *testing.T) {
	cases := loadNumfmtCases(t)
	if len(cases) < 20000 {
		t.Fatalf("corpus has %d cases; regenerate it with gen.js", len(cases))
	}
	e := hostTestEngine(t)
	const batch = 4000
	var mismatches []string
	failed := 0
	for start := 0; start < len(cases); start += batch {
		chunk := cases[start:min(start+batch, len(cases))]
		in := make([][3]string, len(chunk))
		for i, c := range chunk {
			in[i] = [3]string{c.method, c.bits, c.arg}
		}
		args, _ := json.Marshal(map[string]any{"cases": in})
		res := mustRun(t, e, numfmtProgram, string(args), nil,
			Options{Limits: Limits{WallTime: 60 * time.Second, OutputBytes: 16 << 20}})
		var got []string
		if err := json.Unmarshal(res.Value, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(chunk) {
			t.Fatalf("got %d results for %d cases", len(got), len(chunk))
		}
		for i, c := range chunk {
			if got[i] != c.want {
				failed++
				if len(mismatches) < 25 {
					mismatches = append(mismatches, fmt.Sprintf("%s(bits %s, %s): Node %q, guest %q", c.method, c.bits, c.arg, c.want, got[i]))
				}
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d cases differ from Node:\n%s", failed, len(cases), strings.Join(mismatches, "\n"))
	}
}

// TestGuestNumberTies spells out the ties the corpus holds, so that a failure reads plainly.
func TestGuestNumberTies(t *testing.T) {
	e := hostTestEngine(t)
	for _, tc := range []struct{ expr, want string }{
		{"(2.5).toFixed(0)", "3"},      // a tie rounds up, not to even
		{"(0.5).toFixed(0)", "1"},      // also below one
		{"(-2.5).toFixed(0)", "-3"},    // up in magnitude for negatives
		{"(1.005).toFixed(2)", "1.00"}, // not a tie: 1.005 is 1.00499999999999989...
		{"(9.5).toFixed(0)", "10"},     // the carry adds a digit
		{"(-9.5).toFixed(0)", "-10"},
		{"(0.125).toFixed(2)", "0.13"},
		{"(99.5).toPrecision(2)", "1.0e+2"},
		{"(1.25).toExponential(1)", "1.3e+0"},
		{"(25).toPrecision(1)", "3e+1"},
		{"(-0).toFixed(2)", "0.00"},
		{"String(-0)", "0"},
		{"(5e-324).toString()", "5e-324"},
		{"(1e21).toFixed(2)", "1e+21"},
		{"(0.1 + 0.2).toString()", "0.30000000000000004"},
	} {
		res := mustRun(t, e, "function run() { return "+tc.expr+"; }", "{}", nil, Options{})
		var got string
		if err := json.Unmarshal(res.Value, &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q (as in Node)", tc.expr, got, tc.want)
		}
	}
}

// numparseProgram reads each input every way a program can: Number(), parseFloat(),
// JSON.parse(), parseInt() for integers, and (literalsProgram) as a literal in the source.
const numparseProgram = `
function show(x) { return Object.is(x, -0) ? "-0" : String(x); }
function run(a) {
  return a.inputs.map((s) => {
    const got = [show(Number(s)), show(parseFloat(s)), show(JSON.parse(s))];
    if (/^-?[0-9]+$/.test(s)) got.push(show(parseInt(s, 10)));
    return got;
  });
}`

func literalsProgram(inputs []string) string {
	var b strings.Builder
	b.WriteString("function show(x) { return Object.is(x, -0) ? \"-0\" : String(x); }\nfunction run() { return [\n")
	for _, s := range inputs {
		b.WriteString(s)
		b.WriteString(",\n")
	}
	b.WriteString("].map(show); }")
	return b.String()
}

// TestGuestNumberParsing checks the guest's decimal → double conversion against a corpus
// generated with Node (testdata/numfmt/parse.tsv): StringToNumber and NumericLiteral take
// "the Number value for the MV", rounded to nearest with ties to even, and only once. It
// holds integers of 17 to 25 digits (QuickJS 2021 read an integer of more than 19 digits
// as n × 10^k, rounding twice: 123456789012345680000 became 123456789012345670000),
// exponents across the whole range, exact halfway points between neighbouring doubles and
// their neighbours, subnormals and the overflow edge.
func TestGuestNumberParsing(t *testing.T) {
	f, err := os.Open("testdata/numfmt/parse.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type parseCase struct{ in, want string }
	var cases []parseCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		in, want, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("parse.tsv: bad line %q", sc.Text())
		}
		cases = append(cases, parseCase{in, want})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10000 {
		t.Fatalf("corpus has %d cases; regenerate it with gen.js parse", len(cases))
	}
	e := hostTestEngine(t)
	opts := Options{Limits: Limits{WallTime: 60 * time.Second, OutputBytes: 16 << 20}}
	const batch = 5000
	var mismatches []string
	failed := 0
	for start := 0; start < len(cases); start += batch {
		chunk := cases[start:min(start+batch, len(cases))]
		inputs := make([]string, len(chunk))
		for i, c := range chunk {
			inputs[i] = c.in
		}
		args, _ := json.Marshal(map[string]any{"inputs": inputs})
		var read [][]string
		if err := json.Unmarshal(mustRun(t, e, numparseProgram, string(args), nil, opts).Value, &read); err != nil {
			t.Fatal(err)
		}
		var lits []string
		if err := json.Unmarshal(mustRun(t, e, literalsProgram(inputs), "{}", nil, opts).Value, &lits); err != nil {
			t.Fatal(err)
		}
		if len(read) != len(chunk) || len(lits) != len(chunk) {
			t.Fatalf("got %d and %d results for %d cases", len(read), len(lits), len(chunk))
		}
		for i, c := range chunk {
			got := append(read[i], lits[i])
			for j, g := range got {
				if g != c.want {
					failed++
					if len(mismatches) < 25 {
						how := [...]string{"Number", "parseFloat", "JSON.parse", "parseInt", "literal"}[j]
						if j == len(got)-1 {
							how = "literal"
						}
						in := c.in
						if len(in) > 60 {
							in = in[:60] + "…"
						}
						mismatches = append(mismatches, fmt.Sprintf("%s(%s): Node %s, guest %s", how, in, c.want, g))
					}
				}
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d readings differ from Node:\n%s", failed, strings.Join(mismatches, "\n"))
	}
}

// TestGuestNumberParsingRadix: hexadecimal, octal and binary integers (literals, Number(),
// parseInt with radix 2, 16, 32) round once too. Past 64 bits QuickJS 2021 dropped the
// digits that did not fit, so a value just above a halfway point rounded down; they now
// count as a sticky bit. Expected values are Node's.
func TestGuestNumberParsingRadix(t *testing.T) {
	e := hostTestEngine(t)
	cases := [][2]string{
		{`0x1fffffffffffff8001`, "590295810358705700000"}, // above halfway: up
		{`0x1fffffffffffff8000`, "590295810358705700000"}, // halfway, odd below: to even, up
		{`0x1ffffffffffffe8000`, "590295810358705500000"}, // halfway, even below: stays
		{`0x1ffffffffffffe8001`, "590295810358705600000"}, // above halfway: up
		{`0x20000000000001000000000000001`, "1.0384593717069658e+34"},
		{`0x20000000000001000000000000000`, "1.0384593717069655e+34"},
		{`Number("0x20000000000001000000000000001")`, "1.0384593717069658e+34"},
		{`parseInt("20000000000001000000000000001", 16)`, "1.0384593717069658e+34"},
		{`parseInt("1" + "0".repeat(53) + "1" + "0".repeat(20) + "1", 2)`, "3.777893186295716e+22"},
		{`0b1000000000000000000000000000000000000000000000000000010000000000000000000000000000001`, "1.934281311383407e+25"},
		{`0o100000000000000000000400000000001`, "7.922816251426434e+28"},
		{`parseInt("1" + "0".repeat(10) + "g" + "0".repeat(8) + "1", 32)`, "1.26765060022823e+30"},
		{`Number("0x" + "f".repeat(13) + "c" + "0".repeat(243))`, "Infinity"},
	}
	var b strings.Builder
	b.WriteString("function run() { return [\n")
	for _, c := range cases {
		b.WriteString(c[0] + ",\n")
	}
	b.WriteString("].map(String); }")
	var got []string
	if err := json.Unmarshal(mustRun(t, e, b.String(), "{}", nil, Options{}).Value, &got); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got[i] != c[1] {
			t.Errorf("%s = %s, want %s (as in Node)", c[0], got[i], c[1])
		}
	}
}
