package datadriven

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven test files")

// Case is one test case of a file.
type Case struct {
	File string
	Line int
	Cmd  string            // the command word
	Args map[string]string // key=value pairs after the command (a bare key maps to "")
	Rule string            // the quoted specification sentence the case checks
	// Input is the text between the rule and the separator, joined with newlines.
	Input    string
	Expected string

	start, end int // expected-output line range, for rewriting
}

// Walk parses file and runs f on each case as a subtest named after the case's name=
// argument. f returns the actual output; it is compared with the expected output or,
// under -rewrite, written back to the file.
func Walk(t *testing.T, file string, f func(t *testing.T, c *Case) string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	cases, err := parse(file, lines)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var outputs []string
	for _, c := range cases {
		name := c.Args["name"]
		if name == "" || names[name] {
			t.Fatalf("%s:%d: each case needs a unique name= argument", file, c.Line)
		}
		names[name] = true
		if c.Rule == "" {
			t.Fatalf("%s:%d: case %s quotes no rule", file, c.Line, name)
		}
		var got string
		t.Run(name, func(t *testing.T) {
			got = strings.TrimRight(f(t, c), "\n")
			if !*rewrite && got != c.Expected {
				t.Errorf("%s:%d: %s\nrule: %s\ninput:\n%s\ngot:\n%s\nwant:\n%s", file, c.Line, name, c.Rule, c.Input, got, c.Expected)
			}
		})
		outputs = append(outputs, got)
	}
	if *rewrite {
		var out []string
		prev := 0
		for i, c := range cases {
			out = append(out, lines[prev:c.start]...)
			if outputs[i] != "" {
				out = append(out, strings.Split(outputs[i], "\n")...)
			}
			prev = c.end
		}
		out = append(out, lines[prev:]...)
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Cases returns the number of cases in file (for tests that count coverage).
func Cases(file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	cs, err := parse(file, strings.Split(string(data), "\n"))
	return len(cs), err
}

func parse(file string, lines []string) ([]*Case, error) {
	var cases []*Case
	i := 0
	for i < len(lines) {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := &Case{File: file, Line: i + 1, Args: map[string]string{}}
		fields := strings.Fields(l)
		c.Cmd = fields[0]
		for _, a := range fields[1:] {
			k, v, _ := strings.Cut(a, "=")
			c.Args[k] = v
		}
		i++
		var input []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			if r, ok := strings.CutPrefix(lines[i], "rule: "); ok && len(input) == 0 {
				if c.Rule != "" {
					c.Rule += " "
				}
				c.Rule += r
				continue
			}
			if strings.TrimSpace(lines[i]) == "" {
				return nil, fmt.Errorf("%s:%d: blank line before ----", file, i+1)
			}
			input = append(input, lines[i])
		}
		if i >= len(lines) {
			return nil, fmt.Errorf("%s:%d: case without ----", file, c.Line)
		}
		c.Input = strings.Join(input, "\n")
		i++ // ----
		c.start = i
		var exp []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.end = i
		c.Expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases, nil
}
