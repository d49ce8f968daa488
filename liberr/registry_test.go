package liberr

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite ERRORS.md from the registry")

// moduleRoot is the repository root, where go.mod and ERRORS.md are.
const moduleRoot = ".."

// "A single registry of every code a model, an MCP client or an operator can see
// (name, meaning, which layer emits it)": codes are unique, sorted, and each says
// what it means and who emits it.
func TestRegistryIsWellFormed(t *testing.T) {
	for i, r := range registry {
		if r.code == "" || r.meaning == "" || r.layers == "" {
			t.Errorf("entry %d (%q) lacks a code, a meaning or a layer", i, r.code)
		}
		if i > 0 && registry[i-1].code >= r.code {
			t.Errorf("entry %q is not after %q: the registry is sorted and has each code once", r.code, registry[i-1].code)
		}
		if e, ok := Lookup(Code(r.code)); !ok || e.Code != Code(r.code) {
			t.Errorf("Lookup(%q) = %v, %v", r.code, e, ok)
		}
	}
	if _, ok := Lookup("no_such_code"); ok {
		t.Error("Lookup found an unregistered code")
	}
}

// emitted scans the module's production Go files for the codes they can return (see
// scanCodes). It returns, for each code, the set of package directories that emit it.
func emitted(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out, err := scanCodes(moduleRoot, sharedCodes(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scanCodes reads the production Go files under root, package by package, and
// returns every code they can emit, with the directories that emit it. A code is a
// string literal (or a shared code, liberr.CodeX, or a conversion of either) found
//
//   - as the value of a constant or variable named Code… or code…, or declared of
//     type Code or liberr.Code;
//   - as the Code field of a composite literal (&liberr.Error{Code: …});
//   - as a conversion Code("…") or liberr.Code("…");
//   - as the code argument of liberr.New, liberr.Wrap or liberr.WrapQuoting, the fallback of
//     liberr.CodeOr, or the code argument of any function of the same package that
//     takes a Code or liberr.Code parameter: a package's own constructor
//     (errorf(CodeX, …), sentinel("…")) is seen like liberr's.
func scanCodes(root string, shared map[string]Code) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	add := func(code, dir string) {
		if code == "" {
			return
		}
		if out[code] == nil {
			out[code] = map[string]bool{}
		}
		out[code][dir] = true
	}
	// A code is a string literal, a shared code named as liberr.CodeX (codes.go), or
	// a conversion of either (Code(liberr.CodeX)).
	var str func(e ast.Expr) (string, bool)
	str = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "liberr" {
				c, ok := shared[e.Sel.Name]
				return string(c), ok
			}
		case *ast.CallExpr:
			if len(e.Args) == 1 && (isCodeType(e.Fun) || isIdent(e.Fun, "string")) {
				return str(e.Args[0])
			}
		case *ast.ParenExpr:
			return str(e.X)
		}
		return "", false
	}
	fset := token.NewFileSet()
	files := map[string][]*ast.File{} // by package directory
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "build" || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		if dir == "liberr" {
			return nil // declares the shared codes; the packages that name them emit them
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		files[dir] = append(files[dir], f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for dir, fs := range files {
		// The package's own constructors: functions with a code parameter, by name,
		// with the parameter's position.
		ctors := map[string][]int{}
		for _, f := range fs {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv != nil {
					continue
				}
				i := 0
				for _, field := range fd.Type.Params.List {
					n := max(len(field.Names), 1)
					if isCodeType(field.Type) {
						for j := range n {
							ctors[fd.Name.Name] = append(ctors[fd.Name.Name], i+j)
						}
					}
					i += n
				}
			}
		}
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					typed := n.Type != nil && isCodeType(n.Type)
					for i, name := range n.Names {
						if i < len(n.Values) && (typed || strings.HasPrefix(strings.ToLower(name.Name), "code")) {
							if s, ok := str(n.Values[i]); ok {
								add(s, dir)
							}
						}
					}
				case *ast.KeyValueExpr:
					if isIdent(n.Key, "Code") {
						if s, ok := str(n.Value); ok {
							add(s, dir)
						}
					}
				case *ast.CallExpr:
					if len(n.Args) == 1 && isCodeType(n.Fun) {
						if s, ok := str(n.Args[0]); ok {
							add(s, dir)
						}
					}
					switch fn := n.Fun.(type) {
					case *ast.SelectorExpr:
						if isIdent(fn.X, "liberr") && (fn.Sel.Name == "New" || fn.Sel.Name == "Wrap" || fn.Sel.Name == "WrapQuoting" || fn.Sel.Name == "CodeOr") && len(n.Args) >= 2 {
							if s, ok := str(n.Args[1]); ok {
								add(s, dir)
							}
						}
					case *ast.Ident:
						for _, i := range ctors[fn.Name] {
							if i < len(n.Args) {
								if s, ok := str(n.Args[i]); ok {
									add(s, dir)
								}
							}
						}
					}
				}
				return true
			})
		}
	}
	return out, nil
}

// isCodeType reports whether e names the code type: Code (a package's alias of
// liberr.Code) or liberr.Code.
func isCodeType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Code"
	case *ast.SelectorExpr:
		return isIdent(e.X, "liberr") && e.Sel.Name == "Code"
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// "Make sure it would catch a code created via a package-local constructor": the
// scan of a package that makes its codes only through constructors of its own, a
// typed constant and a conversion finds each of them, and nothing else.
func TestScanSeesLocalConstructors(t *testing.T) {
	got, err := scanCodes(filepath.Join("testdata", "scan"), map[string]Code{"CodeCanceled": "canceled"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"by_conversion", "by_ctor", "by_ctor_second", "by_sentinel", "by_typed_const", "by_wrap", "by_wrap_quoting", "canceled"}
	var codes []string
	for c, dirs := range got {
		codes = append(codes, c)
		if !dirs["fake"] || len(dirs) != 1 {
			t.Errorf("code %q found in %v, want only fake", c, sortedSet(dirs))
		}
	}
	sort.Strings(codes)
	if !slices.Equal(codes, want) {
		t.Errorf("scan found %v, want %v", codes, want)
	}
}

// "A test that every code emitted anywhere is in the registry and documented": a
// code the module can return is registered, under every layer that returns it, and
// the registry holds no code nothing returns.
func TestRegistryCoversEveryCode(t *testing.T) {
	found := emitted(t)
	if len(found) < 50 {
		t.Fatalf("the scan found only %d codes: it does not see the module", len(found))
	}
	for code, dirs := range found {
		e, ok := Lookup(Code(code))
		if !ok {
			t.Errorf("code %q (emitted by %s) is not in liberr's registry", code, strings.Join(sortedSet(dirs), ", "))
			continue
		}
		for _, d := range sortedSet(dirs) {
			if !slices.Contains(e.Layers, d) {
				t.Errorf("code %q is emitted by %s, which its registry entry does not name (%s)", code, d, strings.Join(e.Layers, " "))
			}
		}
	}
	for _, e := range Registry() {
		dirs, ok := found[string(e.Code)]
		if !ok {
			t.Errorf("registered code %q is emitted nowhere", e.Code)
			continue
		}
		for _, l := range e.Layers {
			if !dirs[l] {
				t.Errorf("registered code %q names layer %s, which does not emit it", e.Code, l)
			}
		}
	}
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errorsDoc renders ERRORS.md from the registry.
func errorsDoc() []byte {
	var b bytes.Buffer
	b.WriteString("# Error codes\n\n")
	b.WriteString("Every code a model, an MCP client or an operator can see, with the packages that emit it.\n")
	b.WriteString("Codes are stable; messages are for people and may change. Every error is a `*liberr.Error`\n")
	b.WriteString("(`Code`, `Layer`, `Message`, `Details`, the wrapped cause): match it with `errors.Is` against\n")
	b.WriteString("any error of the same code, whichever layer made it, and read it with `errors.As`.\n\n")
	b.WriteString("Generated from `liberr/registry.go` by `go test ./liberr -run TestErrorsDoc -update`; the test\n")
	b.WriteString("fails when this file and the registry differ.\n\n")
	b.WriteString("| code | emitted by | meaning |\n|---|---|---|\n")
	for _, e := range Registry() {
		layers := make([]string, len(e.Layers))
		for i, l := range e.Layers {
			layers[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Code, strings.Join(layers, ", "), strings.ReplaceAll(e.Meaning, "|", `\|`))
	}
	return b.Bytes()
}

// "A generated ERRORS.md ... checked for drift by a test".
func TestErrorsDoc(t *testing.T) {
	path := filepath.Join(moduleRoot, "ERRORS.md")
	want := errorsDoc()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ERRORS.md differs from liberr's registry; regenerate it with go test ./liberr -run TestErrorsDoc -update")
	}
}

// sharedCodes reads the constants of codes.go: name to code.
func sharedCodes(t *testing.T) map[string]Code {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Code{}
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for i, name := range v.Names {
				if i < len(v.Values) {
					if bl, ok := v.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						c, _ := strconv.Unquote(bl.Value)
						out[name.Name] = Code(c)
					}
				}
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("codes.go declares no shared code")
	}
	return out
}
