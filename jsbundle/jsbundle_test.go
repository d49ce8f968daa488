package jsbundle

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/js"
)

const seedClock = `export async function run(args: { timezone: string }, libos: any) {
  const observed = await libos.syscall("clock.now", {timezone: args.timezone});
  return {iso8601: String(observed.iso8601), timezone: String(observed.timezone)};
}
`

// The output is "one script that defines run for the sandbox (no module loader exists in
// the guest)": strict, no module syntax, run a global function declaration.
func TestProgramIsGlobalScript(t *testing.T) {
	prog, diags := Compile(seedClock, Options{})
	if prog == nil {
		t.Fatalf("rejected: %+v", diags)
	}
	const want = `"use strict";
async function run(args, libos) {
  const observed = await libos.syscall("clock.now", { timezone: args.timezone });
  return { iso8601: String(observed.iso8601), timezone: String(observed.timezone) };
}
`
	if prog.Source != want {
		t.Errorf("Source =\n%s\nwant\n%s", prog.Source, want)
	}
}

// "Deterministic: the same source gives byte-identical output and diagnostics." Every
// datadriven case is compiled repeatedly, also concurrently, and compared.
func TestDeterministic(t *testing.T) {
	cases := readCases(t, "testdata/compile.txt")
	type result struct {
		src   string
		diags []Diagnostic
	}
	first := make([]result, len(cases))
	for i, c := range cases {
		p, d := Compile(c.src, Options{MaxSourceBytes: c.max})
		if p != nil {
			first[i].src = p.Source
		}
		first[i].diags = d
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(cases)*4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, c := range cases {
				p, d := Compile(c.src, Options{MaxSourceBytes: c.max})
				src := ""
				if p != nil {
					src = p.Source
				}
				if src != first[i].src || !reflect.DeepEqual(d, first[i].diags) {
					errs <- c.name
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: a second compile differs from the first", name)
	}
}

// Diagnostics for the export contract show the accepted form.
func TestExportMessagesShowAcceptedForm(t *testing.T) {
	for _, src := range []string{
		"export const run = () => ({});\n",
		"export default function run() { return {}; }\n",
		"function run() {}\n",
		"function run() {}\nexport { run };\n",
	} {
		_, diags := Compile(src, Options{})
		if len(diags) == 0 {
			t.Fatalf("%q accepted", src)
		}
		if !strings.Contains(diags[0].Message, "export function run(args, libos)") || !strings.Contains(diags[0].Message, "export async function run(args, libos)") {
			t.Errorf("%q: message %q does not show the accepted form", src, diags[0].Message)
		}
	}
}

// Bad input always gets a clear, typed result: invalid UTF-8 is a syntax error at its
// place.
func TestInvalidUTF8(t *testing.T) {
	prog, diags := Compile("export function run() {\n  return { s: \"a\xffb\" };\n}\n", Options{})
	if prog != nil || len(diags) != 1 || diags[0].Code != CodeSyntaxError || diags[0].Line != 2 || diags[0].Column != 17 {
		t.Fatalf("got %v %+v", prog, diags)
	}
}

// The size limit counts bytes, and a source of exactly the limit is accepted.
func TestSizeLimitBoundary(t *testing.T) {
	src := "export function run() { return {}; }\n"
	if p, d := Compile(src, Options{MaxSourceBytes: len(src)}); p == nil {
		t.Errorf("source at the limit rejected: %+v", d)
	}
	if _, d := Compile(src, Options{MaxSourceBytes: len(src) - 1}); len(d) != 1 || d[0].Code != CodeSourceTooLarge {
		t.Errorf("source over the limit: %+v", d)
	}
	big := "export function run() { return {}; }\n" + strings.Repeat("//"+strings.Repeat("x", 98)+"\n", DefaultMaxSourceBytes/100)
	if _, d := Compile(big, Options{}); len(d) != 1 || d[0].Code != CodeSourceTooLarge {
		t.Errorf("default limit: %d bytes gave %+v", len(big), d)
	}
}

// A program whose own identifiers resemble the checker's probe is still checked: the
// probe is renamed until it collides with nothing in the source.
func TestProbeCollision(t *testing.T) {
	src := "function f(__libos_probe: any, __libos_probe0: any) { return eval; }\nexport function run() { return { f }; }\n"
	_, diags := Compile(src, Options{})
	if len(diags) != 1 || diags[0].Code != CodeEvalForbidden || diags[0].Line != 1 || diags[0].Column != 62 {
		t.Fatalf("got %+v", diags)
	}
	esc := "function f(\\u005f_libos_probe: any) { return eval; }\nexport function run() { return { f }; }\n"
	if _, diags := Compile(esc, Options{}); len(diags) != 1 || diags[0].Code != CodeEvalForbidden {
		t.Fatalf("escaped probe name: got %+v", diags)
	}
}

// A hashbang line does not survive into the script (where it could no longer be first).
func TestHashbang(t *testing.T) {
	prog, diags := Compile("#!/usr/bin/env -S deno run\nexport function run() { return {}; }\n", Options{})
	if prog == nil {
		t.Fatalf("rejected: %+v", diags)
	}
	if strings.Contains(prog.Source, "#!") || !strings.HasPrefix(prog.Source, "\"use strict\";\n") {
		t.Errorf("Source = %q", prog.Source)
	}
}

// Warnings from esbuild reach the model with positions, and do not reject.
func TestTranspileWarning(t *testing.T) {
	prog, diags := Compile("export function run(args: { n: number }) {\n  return { same: args.n === -0 };\n}\n", Options{})
	if prog == nil || len(diags) != 1 || diags[0].Code != CodeTranspileWarning || diags[0].Severity != SeverityWarning || diags[0].Line != 2 {
		t.Fatalf("got %v %+v", prog, diags)
	}
}

// Every accepted program's source parses as a script with no module syntax (checked here
// with an independent parser; the sandbox tests check it with QuickJS).
func TestAcceptedOutputsHaveNoModuleSyntax(t *testing.T) {
	for _, c := range readCases(t, "testdata/compile.txt") {
		p, _ := Compile(c.src, Options{MaxSourceBytes: c.max})
		if p == nil {
			continue
		}
		ast, err := js.Parse(parse.NewInputString(p.Source), js.Options{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		v := &scriptVerifier{}
		js.Walk(v, ast)
		if v.module || !strings.HasPrefix(p.Source, "\"use strict\";\n") {
			t.Errorf("%s: not a strict global script:\n%s", c.name, p.Source)
		}
	}
}

func ExampleCompile() {
	_, diags := Compile("import fs from \"fs\";\nexport function run() {\n  return { v: eval(\"1\") };\n}\n", Options{})
	for _, d := range diags {
		fmt.Printf("%d:%d %s %s\n", d.Line, d.Column, d.Severity, d.Code)
	}
	// Output:
	// 1:1 error import_forbidden
	// 3:15 error eval_forbidden
}

// scriptVerifier finds module syntax in a parsed script.
type scriptVerifier struct{ module, run bool }

func (v *scriptVerifier) Enter(n js.INode) js.IVisitor {
	switch n := n.(type) {
	case *js.ImportStmt, *js.ExportStmt, *js.ImportMetaExpr:
		v.module = true
	case *js.CallExpr:
		if lit, ok := literal(n.X); ok && lit.TokenType == js.ImportToken {
			v.module = true
		}
	}
	return v
}

func (v *scriptVerifier) Exit(js.INode) {}
