package tsscan

import (
	"fmt"
	"strings"
	"testing"
)

func kinds(src string) string {
	var out []string
	for _, f := range Scan(src) {
		out = append(out, fmt.Sprintf("%d@%d", f.Kind, f.Offset))
	}
	return strings.Join(out, " ")
}

// The scan works on tokens: keywords inside strings, templates, comments and regular
// expressions, and keywords used as member names, are not module forms.
func TestScan(t *testing.T) {
	for _, c := range []struct {
		rule, src, want string
	}{
		{"a string holding import is data", `const s = "import x from 'y'";`, ""},
		{"a template holding import is data", "const s = `import ${'export'} x`;", ""},
		{"nested templates are data", "const s = `a${`import ${`export`}`}`;", ""},
		{"a line comment is not code", "// import x from 'y'\n", ""},
		{"a block comment is not code", "/* export * from 'x' */", ""},
		{"a regular expression is not code", "const r = /import|export/;", ""},
		{"a regular expression class may hold a slash", "const r = /[/]import/;", ""},
		{"division is not a regular expression", "const r = a / b; import x from 'y';", fmt.Sprintf("%d@17", ImportDecl)},
		{"a dotted member named import", "a.import(1); a?.export;", ""},
		{"an object key named import", "const o = { import: 1, export: 2 };", ""},
		{"a class method named import", "class A { import() {} static export(): void {} }", ""},
		{"an interface member named import", "interface I { import?: string; export: number }", ""},
		{"import() inside a conditional is dynamic", "const m = c ? import('x') : null;", fmt.Sprintf("%d@14", DynamicImport)},
		{"import() inside a block is dynamic", "function f() { import('x'); }", fmt.Sprintf("%d@15", DynamicImport)},
		{"import.meta", "f(import.meta)", fmt.Sprintf("%d@2", ImportMeta)},
		{"import type", "import type { A } from 'a';", fmt.Sprintf("%d@0", ImportDecl)},
		{"import-equals", "import x = require('x');", fmt.Sprintf("%d@0", ImportEquals)},
		{"import type equals", "import type x = require('x');", fmt.Sprintf("%d@0", ImportEquals)},
		{"triple-slash reference", "/// <reference lib=\"dom\" />\n", fmt.Sprintf("%d@0", ReferenceDirective)},
		{"a triple-slash comment that is not a directive", "/// just a note\n", ""},
		{"export inside a namespace is not a module export", "namespace N { export const a = 1; }", ""},
		{"export function run", "export function run() {}", fmt.Sprintf("%d@16", ExportRun)},
		{"export async function run", "export async function run() {}", fmt.Sprintf("%d@22", ExportRun)},
		{"export default", "export default 1;", fmt.Sprintf("%d@0", ExportDefault)},
		{"export run as default", "export { run as default };", fmt.Sprintf("%d@16", ExportDefault)},
		{"export list from", "export { a } from 'a';", fmt.Sprintf("%d@0", Reexport)},
		{"export =", "export = f;", fmt.Sprintf("%d@0", ExportAssignment)},
		{"escaped identifiers are decoded", "export function r\\u0075n() {}", fmt.Sprintf("%d@16", ExportRun)},
		{"a hashbang is skipped", "#!/usr/bin/env x\nimport 'a';", fmt.Sprintf("%d@17", ImportDecl)},
		{"decorators do not stop the scan", "@dec class A {}\nimport 'a';", fmt.Sprintf("%d@16", ImportDecl)},
	} {
		if got := kinds(c.src); got != c.want {
			t.Errorf("%s: Scan(%q) = %q, want %q", c.rule, c.src, got, c.want)
		}
	}
}

// The compiler lexes a source once and asks both questions of the same tokens: the
// answers are those of lexing it for each, in either order.
func TestTokensShared(t *testing.T) {
	deep := strings.Repeat("(", 130) + strings.Repeat(")", 130)
	for _, src := range []string{
		"export function run() {}",
		"import x from 'y';\nexport default 1;\n/// <reference lib=\"dom\" />\n",
		"const s = `a${`import ${`export`}`}`; export { a as default };",
		deep + "\nexport function run() {}",
		"a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a=>a;",
	} {
		x := Lex(src)
		off, what, ok := x.Complexity(DefaultLimits)
		scan := x.Scan()
		off2, what2, ok2 := Complexity(src, DefaultLimits)
		if off != off2 || what != what2 || ok != ok2 {
			t.Errorf("%q: Complexity on shared tokens %d %q %v, alone %d %q %v", src, off, what, ok, off2, what2, ok2)
		}
		if got, want := fmt.Sprint(scan), fmt.Sprint(Scan(src)); got != want {
			t.Errorf("%q: Scan on shared tokens %s, alone %s", src, got, want)
		}
		if got, want := fmt.Sprint(Lex(src).Scan()), fmt.Sprint(scan); got != want {
			t.Errorf("%q: Scan before Complexity %s, after %s", src, got, want)
		}
	}
}
