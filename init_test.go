package libos

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// heavyAtInit names the calls that must not run while packages initialise: each
// compiles something (a regular expression, a JSON Schema) that only some commands use,
// and every `libos` process, `libos --help` included, would pay for it before main.
var heavyAtInit = map[string]bool{
	"regexp.MustCompile":      true,
	"regexp.Compile":          true,
	"regexp.MustCompilePOSIX": true,
	"regexp.CompilePOSIX":     true,
	"jsonschema.NewCompiler":  true,
	"template.New":            true,
	"template.Must":           true,
}

// heavyMethods are the compiling methods, whatever their receiver (a jsonschema.Compiler
// held in a variable).
var heavyMethods = map[string]bool{"MustCompile": true, "Compile": true}

// Rule (RATIONALE.md, "Nothing is compiled while packages initialise"): "a package-level
// variable never compiles a pattern or a schema in its initialiser; it holds a
// sync.OnceValue that compiles on first use".
//
// The check walks every non-test Go file of the module and looks at the initialisers of
// package-level variables and at init functions, outside function literals (a
// sync.OnceValue's function runs on first use, not at init).
func TestNothingCompiledAtInit(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "build", "bin", "dist", "node_modules", "scripts":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var check func(n ast.Node)
		check = func(n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false
				case *ast.CallExpr:
					switch fn := n.Fun.(type) {
					case *ast.FuncLit:
						// Called where it is written: its body runs at init.
						check(fn.Body)
					case *ast.SelectorExpr:
						name := fn.Sel.Name
						if id, ok := fn.X.(*ast.Ident); ok {
							name = id.Name + "." + name
						}
						if heavyAtInit[name] || heavyMethods[fn.Sel.Name] {
							bad = append(bad, fset.Position(n.Pos()).String()+": "+name)
						}
					}
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				if decl.Tok != token.VAR {
					continue
				}
				for _, spec := range decl.Specs {
					for _, v := range spec.(*ast.ValueSpec).Values {
						check(v)
					}
				}
			case *ast.FuncDecl:
				if decl.Recv == nil && decl.Name.Name == "init" {
					check(decl.Body)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("compiled while the package initialises (use sync.OnceValue): %s", b)
	}
}
