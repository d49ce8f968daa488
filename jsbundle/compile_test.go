package jsbundle

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expectations of testdata/compile.txt from the current results")

// A case of testdata/compile.txt:
//
//	# Rule: the sentence of the JIT authoring Skill or of the design that the case checks
//	compile name=<name> [max=<MaxSourceBytes>] [crlf]
//	<TypeScript source>
//	----
//	<severity> <code> <line>:<column>   one line per diagnostic, in order
//	ok | rejected                        whether a Program was produced
type compileCase struct {
	rule, name string
	max        int
	crlf       bool
	src        string
	want       string
	cmdLine    int
}

func readCases(t *testing.T, path string) []compileCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []compileCase
	var rule []string
	sc := bufio.NewScanner(f)
	lineNo := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		switch {
		case strings.HasPrefix(line, "#"):
			rule = append(rule, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case strings.HasPrefix(line, "compile "):
			c := compileCase{rule: strings.Join(rule, " "), cmdLine: lineNo}
			rule = nil
			for _, arg := range strings.Fields(line)[1:] {
				k, v, _ := strings.Cut(arg, "=")
				switch k {
				case "name":
					c.name = v
				case "max":
					c.max, _ = strconv.Atoi(v)
				case "crlf":
					c.crlf = true
				default:
					t.Fatalf("%s:%d: unknown argument %q", path, lineNo, arg)
				}
			}
			var src, want []string
			for {
				l, ok := next()
				if !ok || l == "----" {
					break
				}
				src = append(src, l)
			}
			for {
				l, ok := next()
				if !ok || l == "" {
					break
				}
				want = append(want, l)
			}
			nl := "\n"
			if c.crlf {
				nl = "\r\n"
			}
			c.src = strings.Join(src, nl) + nl
			c.want = strings.Join(want, "\n")
			cases = append(cases, c)
		case strings.TrimSpace(line) == "":
		default:
			t.Fatalf("%s:%d: unexpected line %q", path, lineNo, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func render(p *Program, diags []Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "%s %s %d:%d\n", d.Severity, d.Code, d.Line, d.Column)
	}
	if p != nil {
		b.WriteString("ok")
	} else {
		b.WriteString("rejected")
	}
	return b.String()
}

// TestCompileCases runs the datadriven cases: accepted programs, and every rejected form
// with its code and its line:column in the original TypeScript.
func TestCompileCases(t *testing.T) {
	const path = "testdata/compile.txt"
	cases := readCases(t, path)
	if len(cases) < 80 {
		t.Errorf("only %d cases; the rules need at least 80", len(cases))
	}
	names := map[string]bool{}
	var got []string
	for _, c := range cases {
		if c.rule == "" || !strings.HasPrefix(c.rule, "Rule:") {
			t.Errorf("%s:%d: case %q does not quote the rule it checks", path, c.cmdLine, c.name)
		}
		if names[c.name] || c.name == "" {
			t.Errorf("%s:%d: case name %q missing or repeated", path, c.cmdLine, c.name)
		}
		names[c.name] = true
		p, diags := Compile(c.src, Options{MaxSourceBytes: c.max})
		out := render(p, diags)
		got = append(got, out)
		if *rewrite {
			continue
		}
		if out != c.want {
			t.Errorf("%s:%d: %s\n%s\nsource:\n%s\ngot:\n%s\nwant:\n%s\nmessages:\n%s", path, c.cmdLine, c.name, c.rule, c.src, out, c.want, messages(diags))
		}
		if (p == nil) != HasErrors(diags) {
			t.Errorf("%s: Program must be nil exactly when there is an error", c.name)
		}
	}
	if *rewrite {
		rewriteCases(t, path, got)
	}
}

func messages(diags []Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "  %d:%d %s: %s\n", d.Line, d.Column, d.Code, d.Message)
	}
	return b.String()
}

// rewriteCases replaces each case's expectation with the results in got, in order.
func rewriteCases(t *testing.T, path string, got []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []string
	n := 0
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if lines[i] != "----" {
			continue
		}
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
		}
		out = append(out, strings.Split(got[n], "\n")...)
		n++
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}
