package liberr

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rule: "No production code is repeated among the error, clip, ID and JSON helpers
// (one of each)". The one of each kind is:
//
//   - errors: liberr.New, Wrap and WrapQuoting. A package may keep a constructor that
//     fixes its own layer (errorf, sentinel, storageErr) only as one statement calling
//     liberr, so the shape of an error is still decided here;
//   - clip: liberr.Clip (and Cut, its prefix without the marker);
//   - IDs: internal/randid.New;
//   - exact JSON: internal/jsonexact.
//
// The scan reads the module's production code (no _test.go file, nothing under
// testdata or build) and reports every place that makes one of these a second way.
// A place on the allow-list below is not a second helper of the kind; its reason says
// why.
var oneHelperAllowed = map[string]string{
	// Secrets and tokens are key material, not names: they are never printed as an ID
	// and need more than randid's 16 bytes or raw bytes rather than hex.
	"store/secret.go: crypto/rand":   "a store secret is 32 bytes of key material kept raw, not an ID",
	"mcpserver/auth.go: crypto/rand": "a bearer token's secret (32 bytes, base64url) handed to a client once, not an ID",
	// The guest's Math.random: a seed, not an identifier, and deliberately not crypto.
	"wasm/run.go: math/rand/v2": "the seed of the guest's Math.random when a call names none",
	// Reads of JSON that are not exact on purpose, or that only walk a text exactness
	// already vetted.
	"mcpserver/gate.go: json.Decoder.Token":          "recoverEnvelope reads the id of a message that failed the exact decode, to answer the request it refuses; exactness is what it is not checking",
	"syscalls/table.go: json.Decoder.Token":          "lists the property names of a route's own (static, compiled-in) argument schema for its doc line",
	"cmd/libos/tape.go: json.Decoder.Token":          "objectFields splits a text jsonexact has just accepted into its members as written (raw text, wire order)",
	"cmd/libos/tape.go: json.Decoder.UseNumber":      "the same split keeps the members' numbers as written",
	"mcpserver/mcpserver.go: json.Decoder.UseNumber": "stripParamHeaders edits a tool's schema the kernel already holds as exact JSON; numbers stay as written",
}

// helperName matches functions that would be a second helper of a kind by their name:
// a clip, a truncation, an ID maker.
var helperName = regexp.MustCompile(`(?i)^(clip|truncate|shorten|ellipsi[sz]e|cutstring|(new|rand|gen|make)_?(id|uid|uuid|nonce)s?$)`)

func TestOneHelperOfEachKind(t *testing.T) {
	root := filepath.Join("..")
	found, err := secondHelpers(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range found {
		key := f.file + ": " + f.what
		if _, ok := oneHelperAllowed[key]; ok {
			seen[key] = true
			continue
		}
		t.Errorf("%s:%d: %s is a second %s helper; use %s (or add it to oneHelperAllowed with the reason it is not one)", f.file, f.line, f.what, f.kind, f.use)
	}
	// An entry that no longer matches anything is stale: the allow-list says why each
	// exception exists, so it must not outlive it.
	var stale []string
	for k := range oneHelperAllowed {
		if !seen[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("oneHelperAllowed[%q] matches nothing any more: remove it", k)
	}
}

// "Make sure it would catch" a second helper of each kind: the scan of a package
// that has one of each finds every one of them.
func TestOneHelperScanSeesEachKind(t *testing.T) {
	found, err := secondHelpers(filepath.Join("testdata", "helpers"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.kind+" "+f.what)
	}
	sort.Strings(got)
	want := []string{
		"ID crypto/rand",
		"ID newID",
		"JSON json.Decoder.Token",
		"JSON json.Decoder.UseNumber",
		"clip clipText",
		"clip utf8.RuneStart",
		"clip … marker",
		"clip … marker",
		"error errorf",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type helperUse struct {
	file, what, kind, use string
	line                  int
}

// secondHelpers lists, for the production Go files under root (liberr, randid and
// jsonexact themselves aside), every place that is a helper of one of the four kinds:
//
//   - clip: a function named like one (clip…, truncate…), a cut on a character
//     boundary by hand (utf8.RuneStart), an ellipsis appended by hand (+ "…"), the
//     marker spelled as a literal of its own instead of liberr.ClipMark;
//   - ID: an import of crypto/rand or math/rand, a function named newID, randID, …;
//   - JSON: a json.Decoder read token by token or with UseNumber, the ways to build
//     an exact decoder of one's own;
//   - error: a function with a liberr.Code (or Code) parameter that returns an error
//     and is more than one statement calling liberr (a constructor with logic).
func secondHelpers(root string) ([]helperUse, error) {
	var out []helperUse
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "build" || n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			switch rel {
			case "liberr", "internal/randid", "internal/jsonexact":
				return filepath.SkipDir // the one of each kind
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
		add := func(pos token.Pos, what, kind, use string) {
			out = append(out, helperUse{file: rel, line: fset.Position(pos).Line, what: what, kind: kind, use: use})
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if path == "crypto/rand" || path == "math/rand" || path == "math/rand/v2" {
				add(im.Pos(), path, "ID", "internal/randid.New")
			}
		}
		decoders := jsonDecoders(f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if helperName.MatchString(n.Name.Name) {
					kind, use := "clip", "liberr.Clip"
					if strings.Contains(strings.ToLower(n.Name.Name), "id") || strings.Contains(strings.ToLower(n.Name.Name), "nonce") {
						kind, use = "ID", "internal/randid.New"
					}
					add(n.Pos(), n.Name.Name, kind, use)
				}
				if n.Recv == nil && takesCode(n) && !oneLibErrCall(n) {
					add(n.Pos(), n.Name.Name, "error", "liberr.New, Wrap or WrapQuoting, in one statement")
				}
			case *ast.SelectorExpr:
				if isIdent(n.X, "utf8") && n.Sel.Name == "RuneStart" {
					add(n.Pos(), "utf8.RuneStart", "clip", "liberr.Clip or liberr.Cut")
				}
			case *ast.BinaryExpr:
				if lit, ok := n.Y.(*ast.BasicLit); ok && n.Op == token.ADD && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, ClipMark) {
						add(n.Pos(), "… marker", "clip", "liberr.Clip")
					}
				}
			case *ast.BasicLit:
				// The marker spelled again (to look for it at the end of a clipped
				// text, say) is a second spelling of liberr.ClipMark.
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && s == ClipMark {
					add(n.Pos(), "… marker", "clip", "liberr.ClipMark")
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Token" || sel.Sel.Name == "UseNumber") {
					if id, ok := sel.X.(*ast.Ident); ok && decoders[id.Name] {
						add(n.Pos(), "json.Decoder."+sel.Sel.Name, "JSON", "internal/jsonexact")
					}
				}
			}
			return true
		})
		return nil
	})
	// One finding per file and kind of use is enough to name the place.
	seen := map[string]bool{}
	var dedup []helperUse
	for _, h := range out {
		if k := h.file + ": " + h.what; !seen[k] {
			seen[k] = true
			dedup = append(dedup, h)
		}
	}
	return dedup, err
}

// jsonDecoders returns the names the file gives to json.NewDecoder results.
func jsonDecoders(f *ast.File) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 {
			return true
		}
		if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "json") && sel.Sel.Name == "NewDecoder" {
				if id, ok := as.Lhs[0].(*ast.Ident); ok {
					names[id.Name] = true
				}
			}
		}
		return true
	})
	return names
}

// takesCode reports whether fn has a parameter of the code type and returns an error
// (an *Error, error or *liberr.Error): an error constructor.
func takesCode(fn *ast.FuncDecl) bool {
	if fn.Type.Results == nil {
		return false
	}
	returnsErr := false
	for _, r := range fn.Type.Results.List {
		t := r.Type
		if st, ok := t.(*ast.StarExpr); ok {
			t = st.X
		}
		if isIdent(t, "error") || isIdent(t, "Error") {
			returnsErr = true
		}
		if sel, ok := t.(*ast.SelectorExpr); ok && isIdent(sel.X, "liberr") && sel.Sel.Name == "Error" {
			returnsErr = true
		}
	}
	if !returnsErr {
		return false
	}
	for _, p := range fn.Type.Params.List {
		if isCodeType(p.Type) {
			return true
		}
	}
	return false
}

// oneLibErrCall reports whether fn's body is one return of a call to liberr, or of
// another function of its package that is (errorf calling newError is still one
// statement deep: the test only asks that no constructor has logic of its own).
func oneLibErrCall(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return false
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	call, ok := ret.Results[0].(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		return isIdent(f.X, "liberr")
	case *ast.Ident:
		return true
	}
	return false
}
