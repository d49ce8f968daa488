package liberr

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// textMatches are the strings functions that read a text for a part of it: what code
// that recovers a code or a layer from an error's text would call.
var textMatches = map[string]bool{
	"Contains": true, "ContainsAny": true, "HasPrefix": true, "HasSuffix": true, "CutPrefix": true, "CutSuffix": true,
	"Cut": true, "Index": true, "LastIndex": true, "EqualFold": true, "TrimPrefix": true, "TrimSuffix": true,
	"Split": true, "SplitN": true, "Fields": true,
}

// textNames are the names that hold an error's text in this module: a variable or a
// field of that name read by a strings function is error text.
var textNames = map[string]bool{"Message": true, "message": true, "Reason": true, "reason": true, "msg": true,
	"failReason": true, "errText": true, "errMsg": true, "Cause": true}

// textFinding is one place where production code reads error text for its parts.
type textFinding struct {
	pos  string // file:line
	fn   string // the enclosing function
	what string
}

// scanErrorText reads the production Go files under root and lists every strings
// function (textMatches) or comparison applied to error text: err.Error(), a Message
// or reason field or variable (textNames), or a variable assigned from one of them in
// the same function.
func scanErrorText(root string) ([]textFinding, error) {
	var out []textFinding
	fset := token.NewFileSet()
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
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				fn = recvName(fd.Recv.List[0].Type) + "." + fn
			}
			out = append(out, scanFunc(fset, rel, fn, fd.Body)...)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out, err
}

// namesLayer reports whether e mentions a layer's name (an identifier Layer or layer,
// or a field .Layer): text cut at a layer's name is a layer recovered from text.
func namesLayer(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			found = found || n.Name == "Layer" || n.Name == "layer"
		case *ast.SelectorExpr:
			found = found || n.Sel.Name == "Layer"
		}
		return !found
	})
	return found
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return recvName(e.X)
	}
	return "?"
}

func scanFunc(fset *token.FileSet, file, fn string, body *ast.BlockStmt) []textFinding {
	tainted := map[string]bool{}
	var isText func(e ast.Expr) bool
	isText = func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.ParenExpr:
			return isText(e.X)
		case *ast.CallExpr:
			if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(e.Args) == 0 {
				return true
			}
		case *ast.SelectorExpr:
			return textNames[e.Sel.Name]
		case *ast.Ident:
			return textNames[e.Name] || tainted[e.Name]
		}
		return false
	}
	// Variables assigned from error text, anywhere in the function.
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && isText(as.Rhs[i]) {
					tainted[id.Name] = true
				}
			}
		}
		return true
	})
	var out []textFinding
	add := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		out = append(out, textFinding{pos: fmt.Sprintf("%s:%d", file, p.Line), fn: fn, what: what})
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || len(n.Args) == 0 {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strings" && textMatches[sel.Sel.Name] {
				switch {
				case isText(n.Args[0]):
					add(n, "strings."+sel.Sel.Name+" on error text")
				case len(n.Args) > 1 && namesLayer(n.Args[1]):
					add(n, "strings."+sel.Sel.Name+" with a layer's name (a layer read out of text)")
				}
			}
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			for _, side := range [2]ast.Expr{n.X, n.Y} {
				if lit, ok := side.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					other := n.X
					if side == n.X {
						other = n.Y
					}
					if isText(other) && lit.Value != `""` {
						add(n, "comparison with "+lit.Value)
					}
				}
			}
		}
		return true
	})
	return out
}

// textExceptions are the places allowed to read error text, each with its reason. A
// place is its file and enclosing function, so that moving lines does not matter.
var textExceptions = map[string]string{
	"store/store.go lockContended": "Pebble reports a lock held by this very process only as text; it has no typed error for it",
	"wasm/run.go trapError":        "wazero's stack-overflow trap is a sentinel of its internal package, which cannot be imported",
	"jsbundle/check.go compiler.walkOutput": "the JavaScript parser (tdewolff/parse) reports its nesting limit only as text; " +
		"the code it decides (too_complex) is the checker's own",
	"cmd/libos/main.go corruptErr":      "presentation: the store's advice is printed once, not twice; no code is decided",
	"engine/image/skill.go yamlMessage": "presentation: the YAML package's name is dropped from a manifest problem; no code is decided",
	"engine/tool.go validate":           "presentation: the schema library's summaries are listed after its leaf findings; no code is decided",
	"mcpserver/oauth.go oauthVerifier.verify": "presentation: go-jose's package path is dropped from a claims problem; " +
		"the code (token_invalid) is decided by errors.Is first",
}

// "No recovery of codes from text": no production code decides a code, a layer or
// a branch by reading an error's text (err.Error(), a Message, a recorded reason);
// what a decision needs travels as a typed field. The few exceptions are listed in
// textExceptions with their reason.
func TestNoCodeFromErrorText(t *testing.T) {
	found, err := scanErrorText(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range found {
		key := f.pos[:strings.LastIndex(f.pos, ":")] + " " + f.fn
		if _, ok := textExceptions[key]; ok {
			used[key] = true
			continue
		}
		t.Errorf("%s (%s): %s; carry what the decision needs as a typed field, or list the place in textExceptions with its reason", f.pos, f.fn, f.what)
	}
	for k := range textExceptions {
		if !used[k] {
			t.Errorf("exception %q matches nothing any more; remove it", k)
		}
	}
}

// The scan sees each way the module once read a code or a layer out of text: a
// reason's words, a layer's name cut off a text, a Message's prefix, a variable
// holding err.Error(), a comparison with err.Error().
func TestScanSeesErrorText(t *testing.T) {
	found, err := scanErrorText(filepath.Join("testdata", "textscan"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range found {
		got[f.fn] = true
	}
	for _, fn := range []string{"afterReturn", "recorded", "byMessage", "byError", "equal"} {
		if !got[fn] {
			t.Errorf("the scan does not see %s reading error text: %+v", fn, found)
		}
	}
}
