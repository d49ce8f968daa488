package jsbundle

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/evanw/esbuild/pkg/api"
	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/js"

	"github.com/agentlibos/libos/jsbundle/internal/srcpos"
)

// probed are the free (global) identifiers whose every use is examined. esbuild's define
// feature replaces exactly the references that resolve to no declaration of the program
// (its own scope analysis, the one that produced the output), so a local variable or
// parameter named require or Function is left alone and never reported.
var probed = []string{"eval", "Function", "require", "Deno", "WebAssembly", "process", "globalThis", "self", "window", "import.meta"}

// forbiddenName maps a global name to the diagnostic that any use of it gets, directly
// or as a property of the global object.
var forbiddenName = map[string]struct{ code, why string }{
	"eval":        {CodeEvalForbidden, "eval runs text as code, which no static check can see"},
	"Function":    {CodeFunctionConstructor, "the Function constructor runs text as code, which no static check can see"},
	"require":     {CodeRequireForbidden, "there is no module loader; keep the tool self-contained"},
	"Deno":        {CodeGlobalForbidden, "the Deno global has no permission here; use libos.syscall"},
	"WebAssembly": {CodeGlobalForbidden, "WebAssembly can load and run code that no static check can see"},
	"process":     {CodeGlobalForbidden, "there is no process object; use libos.syscall for the outside world"},
	"import_meta": {CodeImportMetaForbidden, "there is no module, so import.meta has no meaning"},
}

var globalObjects = map[string]bool{"globalThis": true, "self": true, "window": true}

// checker walks the parsed probe output of one source.
type checker struct {
	c      *compiler
	probe  string
	out    []byte // the probe output, as parsed (with the NUL the parser appends)
	outIdx *srcpos.Index
	sm     *srcpos.SourceMap
	stack  []js.INode

	exports, imports, dynImports int
	runParams                    int
}

// probeDefault is the probe object's name unless the source or its output contains it;
// probeDefines, its define map, is built once.
const probeDefault = "__libos_probe"

var probeDefines = defines(probeDefault)

func defines(probe string) map[string]string {
	define := make(map[string]string, len(probed))
	for _, name := range probed {
		define[name] = probe + "." + strings.ReplaceAll(name, ".", "_")
	}
	return define
}

// probeOptions are the options of the checking transform with the default probe.
var probeOptions = func() api.TransformOptions {
	opts := esbuildOptions()
	opts.Define = probeDefines
	opts.Sourcemap = api.SourceMapExternal
	opts.SourcesContent = api.SourcesContentExclude
	return opts
}()

// checkOutput reports each use of a watched global, and the module forms, on the compiled
// program. The uses come from a second compile in which every watched global is replaced
// by a member of a unique probe object; its output is parsed and walked, and positions
// come from the parsed tokens, through esbuild's source map, back to the TypeScript.
//
// When the first output names none of the watched globals as a word (see namesWatched),
// the second compile would replace nothing and print the same text, so that text is
// walked instead, with nothing left to map.
func (c *compiler) checkOutput(mainCode string) {
	if !c.alwaysProbe && !namesWatched(mainCode) {
		c.walkOutput([]byte(mainCode), "", nil)
		return
	}
	probe := probeDefault
	for i := 0; strings.Contains(c.src, probe) || strings.Contains(mainCode, probe); i++ {
		probe = probeDefault + strconv.Itoa(i)
	}
	opts := probeOptions
	if probe != probeDefault {
		opts.Define = defines(probe)
	}
	res := api.Transform(c.src, opts)
	if len(res.Errors) > 0 {
		c.internal(fmt.Sprintf("the checking compile failed: %s", res.Errors[0].Text))
		return
	}
	sm, err := srcpos.ParseSourceMap(res.Map)
	if err != nil {
		c.internal(err.Error())
		return
	}
	c.walkOutput(res.Code, probe, sm)
}

// watchedWords are the words under which a watched global can appear in esbuild's output:
// the globals' names, and meta for import.meta.
var watchedWords = func() map[string]bool {
	m := make(map[string]bool, len(probed))
	for _, name := range probed {
		m[strings.TrimPrefix(name, "import.")] = true
	}
	return m
}()

// namesWatched reports whether code, an esbuild output, contains a watched global's name
// as a word: a maximal run of ASCII identifier characters. esbuild prints every reference
// to a global under its decoded name (an escape such as \u0065val in the source is printed
// as eval; the ASCII charset escapes only non-ASCII characters), so an output without such
// a word has no use of a watched global for the checking compile to replace. Words in
// strings, property names and comments count too: they only cost the second compile.
func namesWatched(code string) bool {
	for i := 0; i < len(code); {
		if !isWordByte(code[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(code) && isWordByte(code[j]) {
			j++
		}
		if watchedWords[code[i:j]] {
			return true
		}
		i = j
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// walkOutput parses an output of esbuild and walks it: for the uses of probe (when probe
// is set; sm maps their positions back), and for the module forms that must not reach the
// sandbox.
func (c *compiler) walkOutput(code []byte, probe string, sm *srcpos.SourceMap) {
	in := parse.NewInputBytes(code)
	ast, err := js.Parse(in, js.Options{})
	if err != nil {
		// esbuild accepts a few forms outside modules that no script may hold (a top-level
		// return); such a source lacks the run export and is rejected already. Anything
		// else fails closed.
		if HasErrors(c.diags) {
			return
		}
		// The token bounds keep expressions well under this parser's own limits (1,000
		// nested or chained expressions); a shape they miss is still too complex, never
		// an internal error.
		if msg := err.Error(); strings.Contains(msg, "too many nested") {
			c.add(CodeTooComplex, 1, 1, "the source is too deeply nested or too long in one expression to check; split it into smaller statements")
			return
		}
		c.internal(fmt.Sprintf("the compiled output does not parse: %v", err))
		return
	}
	k := &checker{c: c, probe: probe, out: in.Bytes(), sm: sm, runParams: -1}
	if sm != nil {
		k.outIdx = srcpos.NewIndex(string(code))
	}
	js.Walk(k, ast)

	// What the token scan of the TypeScript reported is the precise account; these
	// checks on the output are the backstop that no module form reaches the sandbox.
	if k.imports > 0 && !c.reported(CodeImportForbidden, CodeImportEqualsForbidden) {
		c.add(CodeImportForbidden, 1, 1, "import declarations are not allowed; a tool is one self-contained file")
	}
	if k.dynImports > 0 && !c.reported(CodeDynamicImportForbidden) {
		c.add(CodeDynamicImportForbidden, 1, 1, "import() is not allowed; there is no module loader")
	}
	if k.exports > 0 && !c.reported(CodeExtraExport, CodeDefaultExport, CodeReexportForbidden, CodeRunExportInvalid, CodeExportAssignment, CodeImportEqualsForbidden) {
		c.add(CodeExtraExport, 1, 1, "the only export allowed is "+acceptedForm)
	}
	if k.runParams < 0 && c.runOffset >= 0 {
		// Only signatures (overloads without an implementation) were exported: TypeScript
		// erases them, so nothing would define run.
		line, col := c.idx.Position(c.runOffset)
		c.add(CodeRunExportInvalid, line, col, "run is declared without a body; export its implementation as "+acceptedForm)
	}
	if k.runParams > 2 && c.runOffset >= 0 {
		line, col := c.idx.Position(c.runOffset)
		c.addWarning(CodeRunParams, line, col, fmt.Sprintf("run declares %d parameters; it is called with exactly two, (args, libos)", k.runParams))
	}
}

func (k *checker) Exit(js.INode) { k.stack = k.stack[:len(k.stack)-1] }

func (k *checker) Enter(n js.INode) js.IVisitor {
	k.stack = append(k.stack, n)
	switch n := n.(type) {
	case *js.DotExpr:
		if name, ok := k.probeName(n); ok {
			k.use(name, n)
		}
	case *js.ImportStmt:
		k.imports++
	case *js.ExportStmt:
		if fd, ok := n.Decl.(*js.FuncDecl); ok && !n.Default && n.Module == nil && len(n.List) == 0 &&
			fd.Name != nil && string(fd.Name.Data) == "run" && !fd.Generator {
			k.runParams = len(fd.Params.List)
			if fd.Params.Rest != nil {
				k.runParams++
			}
		} else {
			k.exports++
		}
	case *js.CallExpr:
		if lit, ok := literal(n.X); ok && lit.TokenType == js.ImportToken {
			k.dynImports++
		}
	}
	return k
}

// probeName reports whether d is probe.name, the stand-in for a use of the global name.
func (k *checker) probeName(d *js.DotExpr) (string, bool) {
	v, ok := d.X.(*js.Var)
	if !ok || k.probe == "" || string(v.Name()) != k.probe || root(v).Decl != js.NoDecl {
		return "", false
	}
	lit, ok := literal(d.Y)
	if !ok {
		return "", false
	}
	return string(lit.Data), true
}

// literal returns e as a literal; the parser stores some by value, some by pointer.
func literal(e js.IExpr) (js.LiteralExpr, bool) {
	switch e := e.(type) {
	case js.LiteralExpr:
		return e, true
	case *js.LiteralExpr:
		return *e, true
	}
	return js.LiteralExpr{}, false
}

func root(v *js.Var) *js.Var {
	for v.Link != nil {
		v = v.Link
	}
	return v
}

// use reports one use of a probed global, found at the probe expression d.
func (k *checker) use(name string, d *js.DotExpr) {
	y, _ := literal(d.Y)
	if f, ok := forbiddenName[name]; ok {
		shown := strings.ReplaceAll(name, "_", ".")
		k.report(f.code, y.Data, fmt.Sprintf("%s is not allowed: %s", shown, f.why))
		return
	}
	if globalObjects[name] {
		k.globalObject(name, y.Data, len(k.stack)-1)
	}
}

// globalObject checks the use of a global object (globalThis, self, window) whose
// expression is k.stack[i]. A static member is fine unless it names a forbidden global;
// a computed member with a key that is not a literal, or any use of the object as a value,
// could reach eval, so it is rejected. typeof is fine.
func (k *checker) globalObject(shown string, at []byte, i int) {
	node := k.stack[i]
	var parent js.INode
	if i > 0 {
		parent = k.stack[i-1]
	}
	switch p := parent.(type) {
	case *js.DotExpr:
		if p.X == node {
			if lit, ok := literal(p.Y); ok {
				k.member(shown, string(lit.Data), lit.Data, i-1)
				return
			}
		}
	case *js.IndexExpr:
		if p.X == node {
			if key, data, ok := literalKey(p.Y); ok {
				k.member(shown, key, data, i-1)
				return
			}
			k.report(CodeGlobalAccessForbidden, at, fmt.Sprintf("%s[…] with a computed key is not allowed: it can reach eval; write %s.name or %s[\"name\"]", shown, shown, shown))
			return
		}
	case *js.UnaryExpr:
		if p.Op == js.TypeofToken {
			return
		}
	}
	k.report(CodeGlobalAccessForbidden, at, fmt.Sprintf("%s may only be used as %s.name, %s[\"name\"] or in typeof: passed around as a value it can reach eval", shown, shown, shown))
}

// member checks globalObject.key, whose member expression is k.stack[i].
func (k *checker) member(object, key string, at []byte, i int) {
	if f, ok := forbiddenName[key]; ok && key != "import_meta" {
		k.report(f.code, at, fmt.Sprintf("%s.%s is not allowed: %s", object, key, f.why))
		return
	}
	if globalObjects[key] {
		k.globalObject(object+"."+key, at, i)
	}
}

// literalKey returns the property name that a computed key denotes when it is a
// literal: a string, a number or a template without substitutions.
func literalKey(e js.IExpr) (string, []byte, bool) {
	if lit, ok := literal(e); ok {
		switch {
		case lit.TokenType == js.StringToken:
			return decodeString(lit.Data[1 : len(lit.Data)-1]), lit.Data, true
		case lit.TokenType&js.NumericToken != 0 && lit.TokenType < js.PunctuatorToken:
			return string(lit.Data), lit.Data, true
		}
		return "", nil, false
	}
	switch e := e.(type) {
	case *js.TemplateExpr:
		if e.Tag == nil && len(e.List) == 0 && len(e.Tail) >= 2 {
			return decodeString(e.Tail[1 : len(e.Tail)-1]), e.Tail, true
		}
	case *js.GroupExpr:
		return literalKey(e.X)
	}
	return "", nil, false
}

// decodeString decodes the escapes of a JavaScript string or template body.
func decodeString(b []byte) string {
	var units []uint16
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			r, size := utf8.DecodeRune(b[i:])
			units = utf16.AppendRune(units, r)
			i += size
			continue
		}
		i++
		switch c = b[i]; c {
		case 'n':
			units = append(units, '\n')
			i++
		case 't':
			units = append(units, '\t')
			i++
		case 'r':
			units = append(units, '\r')
			i++
		case 'b':
			units = append(units, '\b')
			i++
		case 'f':
			units = append(units, '\f')
			i++
		case 'v':
			units = append(units, '\v')
			i++
		case '0':
			units = append(units, 0)
			i++
		case '\r':
			i++
			if i < len(b) && b[i] == '\n' {
				i++
			}
		case '\n':
			i++
		case 'x':
			if v, err := strconv.ParseUint(string(b[i+1:min(i+3, len(b))]), 16, 16); err == nil && i+3 <= len(b) {
				units = append(units, uint16(v))
				i += 3
			} else {
				units = append(units, 'x')
				i++
			}
		case 'u':
			if i+1 < len(b) && b[i+1] == '{' {
				end := bytes.IndexByte(b[i:], '}')
				if v, err := strconv.ParseUint(string(b[i+2:i+max(end, 2)]), 16, 32); end > 0 && err == nil && v <= 0x10FFFF {
					units = utf16.AppendRune(units, rune(v))
					i += end + 1
					continue
				}
			} else if i+5 <= len(b) {
				if v, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 16); err == nil {
					units = append(units, uint16(v))
					i += 5
					continue
				}
			}
			units = append(units, 'u')
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			units = utf16.AppendRune(units, r)
			i += size
		}
	}
	return string(utf16.Decode(units))
}

// report adds an error at the output token data, mapped back to the TypeScript.
func (k *checker) report(code string, data []byte, msg string) {
	if len(k.c.diags) >= maxDiagnostics {
		return // the program is rejected; positions of the rest are not worth computing
	}
	line, col := k.position(data)
	k.c.add(code, line, col, msg)
}

// position maps a token of the probe output to its place in the original source. The
// parser returns tokens as sub-slices of its input, so the offset is found by identity,
// never by searching for equal text.
func (k *checker) position(data []byte) (int, int) {
	off := -1
	if len(data) > 0 {
		for i := 0; i+len(data) <= len(k.out); {
			j := bytes.Index(k.out[i:], data)
			if j < 0 {
				break
			}
			if &k.out[i+j] == &data[0] {
				off = i + j
				break
			}
			i += j + 1
		}
	}
	if off < 0 || k.sm == nil {
		return 1, 1
	}
	gl, gc := k.outIdx.Position(off)
	ol, oc, ok := k.sm.Original(gl-1, gc-1)
	if !ok {
		return 1, 1
	}
	return ol + 1, oc + 1
}
