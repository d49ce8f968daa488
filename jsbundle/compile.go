package jsbundle

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/agentlibos/libos/jsbundle/internal/srcpos"
	"github.com/agentlibos/libos/jsbundle/internal/tsscan"
)

// acceptedForm is quoted by every diagnostic about the export contract.
const acceptedForm = "`export function run(args, libos) { … }` or `export async function run(args, libos) { … }`"

// maxDiagnostics bounds what one source can produce; the rest is summarised.
const maxDiagnostics = 100

// mainOptions are the options of the transform whose output the sandbox runs.
var mainOptions = esbuildOptions()

func esbuildOptions() api.TransformOptions {
	return api.TransformOptions{
		Loader:     api.LoaderTS,
		Target:     api.ES2020,
		Platform:   api.PlatformNeutral,
		Sourcefile: "tool.ts",
		LogLevel:   api.LogLevelSilent,
		LogLimit:   maxDiagnostics,
		Charset:    api.CharsetASCII,
		// A tool's source is its own: no tsconfig is read, no JSX, no legal comments.
		TsconfigRaw:   `{"compilerOptions":{}}`,
		LegalComments: api.LegalCommentsNone,
	}
}

// Compile turns a tool's TypeScript into a Program for the sandbox, or reports why it
// cannot. The Program is nil exactly when some diagnostic has error severity; warnings
// may accompany a Program. The same source and options always give byte-identical
// results.
func Compile(source string, opts Options) (*Program, []Diagnostic) {
	compileSlots <- struct{}{}
	defer func() { <-compileSlots }()
	return compile(source, opts, false)
}

// MaxConcurrentCompiles is how many compiles run at once in a process; more wait. One
// compile of a source within the bounds allocates at most MaxCompileAlloc in all, so what
// compiles hold at any time stays under MaxConcurrentCompiles × MaxCompileAlloc however
// many proposals arrive together.
const MaxConcurrentCompiles = 2

// MaxCompileAlloc is what one compile of a source within DefaultMaxSourceBytes may
// allocate in all, under the token bounds; a test compiles every shape known to be
// expensive at full size and checks it.
const MaxCompileAlloc = 96 << 20

var compileSlots = make(chan struct{}, MaxConcurrentCompiles)

// compile is Compile; alwaysProbe makes it run the checking transform even when the output
// names no watched global, so tests can compare both ways on every source they know.
func compile(source string, opts Options, alwaysProbe bool) (*Program, []Diagnostic) {
	limit := opts.MaxSourceBytes
	if limit <= 0 {
		limit = DefaultMaxSourceBytes
	}
	if len(source) > limit {
		return nil, []Diagnostic{{Code: CodeSourceTooLarge, Severity: SeverityError, Line: 1, Column: 1,
			Message: fmt.Sprintf("source is %d bytes; the limit is %d bytes", len(source), limit)}}
	}
	c := &compiler{src: source, idx: srcpos.NewIndex(source), runOffset: -1, alwaysProbe: alwaysProbe}
	if !utf8.ValidString(source) {
		off := 0
		for off < len(source) {
			r, size := utf8.DecodeRuneInString(source[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		line, col := c.idx.Position(off)
		c.add(CodeSyntaxError, line, col, "source is not valid UTF-8")
		return nil, c.result()
	}

	// esbuild's parser is superlinear on a few shapes (deep nesting, long arrow chains,
	// TypeScript's guesses at `<`, long comma expressions, long chains of members or
	// operators); a 64 KiB source of them would take minutes or hundreds of megabytes. They
	// are refused here, on tokens, before esbuild sees them.
	tokens := tsscan.Lex(source)
	if off, what, ok := tokens.Complexity(tsscan.DefaultLimits); !ok {
		c.addAt(CodeTooComplex, off, "the source is too complex to compile ("+what+"); split it into smaller statements or functions")
		return nil, c.result()
	}
	c.moduleForms(tokens)
	main := api.Transform(source, mainOptions)
	c.esbuildMessages(main.Errors, SeverityError)
	c.esbuildMessages(main.Warnings, SeverityWarning)
	if len(main.Errors) > 0 {
		return nil, c.result()
	}
	code := string(main.Code)
	c.checkOutput(code)
	if HasErrors(c.diags) {
		return nil, c.result()
	}
	script, err := sandboxScript(code)
	if err != nil {
		c.internal(err.Error())
		return nil, c.result()
	}
	return &Program{Source: script}, c.result()
}

type compiler struct {
	src       string
	idx       *srcpos.Index
	diags     []Diagnostic
	runOffset int // byte offset of the accepted `export … function run`, or -1

	alwaysProbe bool // run the checking transform whatever the output names
}

func (c *compiler) add(code string, line, col int, msg string) {
	c.diags = append(c.diags, Diagnostic{Code: code, Severity: SeverityError, Message: msg, Line: line, Column: col})
}

func (c *compiler) addWarning(code string, line, col int, msg string) {
	c.diags = append(c.diags, Diagnostic{Code: code, Severity: SeverityWarning, Message: msg, Line: line, Column: col})
}

func (c *compiler) addAt(code string, off int, msg string) {
	line, col := c.idx.Position(off)
	c.add(code, line, col, msg)
}

func (c *compiler) internal(msg string) {
	c.add(CodeInternal, 1, 1, "the compiler could not check this source ("+msg+"); it is rejected")
}

func (c *compiler) reported(codes ...string) bool {
	for _, d := range c.diags {
		for _, code := range codes {
			if d.Code == code {
				return true
			}
		}
	}
	return false
}

// result sorts and deduplicates the diagnostics: by place, then code, then message.
func (c *compiler) result() []Diagnostic {
	d := c.diags
	sort.SliceStable(d, func(i, j int) bool {
		a, b := d[i], d[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
	out := d[:0]
	for i, x := range d {
		if i > 0 && x.Code == d[i-1].Code && x.Line == d[i-1].Line && x.Column == d[i-1].Column {
			continue
		}
		out = append(out, x)
	}
	if len(out) > maxDiagnostics {
		rest := len(out) - maxDiagnostics + 1
		out = append(out[:maxDiagnostics-1], Diagnostic{Code: out[maxDiagnostics-1].Code, Severity: out[maxDiagnostics-1].Severity,
			Line: out[maxDiagnostics-1].Line, Column: out[maxDiagnostics-1].Column,
			Message: fmt.Sprintf("and %d more diagnostics", rest)})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// moduleForms reports the module syntax found on the TypeScript tokens, and records the
// accepted run export.
func (c *compiler) moduleForms(tokens *tsscan.Tokens) {
	// runBad: a diagnostic already says how run must be exported.
	runSeen, runBad := false, false
	for _, f := range tokens.Scan() {
		switch f.Kind {
		case tsscan.ImportDecl:
			c.addAt(CodeImportForbidden, f.Offset, "import declarations are not allowed (type-only and side-effect imports included); a tool is one self-contained file")
		case tsscan.ImportEquals:
			c.addAt(CodeImportEqualsForbidden, f.Offset, "`"+f.Detail+"` is not allowed; a tool is one self-contained file")
		case tsscan.DynamicImport:
			c.addAt(CodeDynamicImportForbidden, f.Offset, "import() is not allowed; there is no module loader")
		case tsscan.ImportMeta:
			c.addAt(CodeImportMetaForbidden, f.Offset, "import.meta is not allowed: there is no module, so it has no meaning")
		case tsscan.ReferenceDirective:
			c.addAt(CodeReferenceDirective, f.Offset, "triple-slash directives are not allowed; a tool is one self-contained file")
		case tsscan.ExportRun:
			if !runSeen {
				c.runOffset = f.Offset
			}
			runSeen = true
		case tsscan.RunInvalid:
			runBad = true
			c.addAt(CodeRunExportInvalid, f.Offset, "run must be exported as "+acceptedForm+", not as "+f.Detail)
		case tsscan.ExportDefault:
			runBad = true
			c.addAt(CodeDefaultExport, f.Offset, "default exports are not allowed; export run by name: "+acceptedForm)
		case tsscan.ExportAssignment:
			runBad = true
			c.addAt(CodeExportAssignment, f.Offset, "`export =` is not allowed; export run by name: "+acceptedForm)
		case tsscan.Reexport:
			c.addAt(CodeReexportForbidden, f.Offset, "re-exports are not allowed; a tool is one self-contained file")
		case tsscan.ExportOther:
			c.addAt(CodeExtraExport, f.Offset, "only run may be exported; `"+f.Detail+"` must not be (remove `export`, or fold it into run)")
		}
	}
	if !runSeen && !runBad {
		c.add(CodeRunExportMissing, 1, 1, "the source must export its entry point as "+acceptedForm)
	}
}

// esbuildMessages turns esbuild's errors and warnings into diagnostics. esbuild counts
// columns in bytes; they are converted to UTF-16 units of the same line.
func (c *compiler) esbuildMessages(msgs []api.Message, sev Severity) {
	for _, m := range msgs {
		line, col := 1, 1
		if m.Location != nil {
			line = m.Location.Line
			col = srcpos.ByteColumnToUTF16(c.idx.Line(line), m.Location.Column) + 1
		}
		code := CodeSyntaxError
		switch {
		case sev == SeverityWarning:
			code = CodeTranspileWarning
		case strings.Contains(m.Text, "configured target environment") || strings.Contains(m.Text, "not supported yet"):
			code = CodeUnsupportedSyntax
		}
		text := m.Text
		for _, n := range m.Notes {
			if n.Text != "" {
				text += " (" + n.Text + ")"
			}
		}
		c.diags = append(c.diags, Diagnostic{Code: code, Severity: sev, Message: text, Line: line, Column: col})
	}
}

// sandboxScript turns esbuild's module output, already checked to export exactly
// `function run`, into the global script the sandbox evaluates: the one `export` keyword
// is removed and the script is made strict, as the module was. The output is scanned again
// first: its only module form must be that export, so nothing else is changed by the
// removal, and QuickJS rejects any module syntax in a script in any case.
func sandboxScript(code string) (string, error) {
	forms := tsscan.Scan(code)
	if len(forms) != 1 || forms[0].Kind != tsscan.ExportRun {
		return "", fmt.Errorf("the output has %d module forms where only the export of run may be", len(forms))
	}
	name := forms[0].Offset
	off := -1
	for _, prefix := range []string{"export function ", "export async function "} {
		if name >= len(prefix) && code[name-len(prefix):name] == prefix {
			off = name - len(prefix)
		}
	}
	if off < 0 || !strings.HasPrefix(code[name:], "run(") {
		return "", fmt.Errorf("the output export is not a function declaration of run")
	}
	body := code[:off] + code[off+len("export "):]
	if strings.HasPrefix(body, "#!") {
		if i := strings.IndexByte(body, '\n'); i >= 0 {
			body = body[i+1:]
		} else {
			body = ""
		}
	}
	return "\"use strict\";\n" + body, nil
}
