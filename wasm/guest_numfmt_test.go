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
