package tsscan

import (
	"fmt"
	"strings"
)

// Kind classifies a finding.
type Kind int

// Finding kinds.
const (
	ImportDecl         Kind = iota + 1 // import … from "m", import "m", import type …
	ImportEquals                       // import x = require("m"), import x = N.y
	DynamicImport                      // import("m") in a value or type position
	ImportMeta                         // import.meta
	ReferenceDirective                 // /// <reference …/>, /// <amd-…/>
	ExportRun                          // export function run / export async function run, at the name run
	RunInvalid                         // run exported in any other form
	ExportDefault                      // export default …, export { x as default }
	ExportAssignment                   // export = x
	Reexport                           // export * from, export { … } from
	ExportOther                        // any other export
)

// Finding is one module form, at a byte offset of the source.
type Finding struct {
	Kind   Kind
	Offset int
	// Detail is the exported name for ExportOther, the offending form for RunInvalid,
	// "async" or "sync" for ExportRun, and the form for the other kinds.
	Detail string
}

// Limits bound the shapes that make a compiler's parser slow or deep: nesting of brackets
// and template substitutions; within one bracket, runs of tokens that nest or make a
// TypeScript parser guess (arrows, `<`, statements without braces); and the length of one
// expression, which parsers hold as a tree as deep as it is long (a sum of 30,000 terms,
// a chain of 29,000 members or calls, 7,000 nested conditionals) and compilers fold and
// print recursively.
type Limits struct {
	Depth  int // brackets ( [ { and `${` open at once
	Arrows int // `=>` in one bracket with no `;`, `,` or block between
	Angles int // `<` in one bracket with no `;` or block between
	Stmts  int // if/else/for/while/do/with in one bracket with no `;`, `,` or block between
	// Operators bounds one expression: punctuation bytes other than `;` and `,` (so `===`
	// counts three), brackets opened in it (calls, indexes, groups), template pieces and
	// the operator keywords, in one bracket with no `;`, `,`, block or statement-ending
	// line break between.
	Operators int
	// Items bounds the comma-separated items of one pair of parentheses (a comma
	// expression, arguments, parameters); array and object literals are not bounded.
	Items int
}

// DefaultLimits are far above what readable code reaches, and below the limits of the
// parser that checks esbuild's output (1,000 nested or chained expressions).
var DefaultLimits = Limits{Depth: 128, Arrows: 16, Angles: 128, Stmts: 64, Operators: 512, Items: 256}

// operatorWords are the keywords that act as operators inside an expression.
var operatorWords = map[string]bool{"typeof": true, "void": true, "delete": true, "await": true, "new": true,
	"in": true, "instanceof": true, "yield": true, "as": true, "satisfies": true, "keyof": true}

// Tokens is a source split into tokens once, for Complexity and Scan to share.
type Tokens struct {
	src      string
	toks     []token
	comments []comment
}

// Lex splits src into tokens.
func Lex(src string) *Tokens {
	toks, comments := tokenize(src)
	return &Tokens{src: src, toks: toks, comments: comments}
}

// Complexity reports the first place where src exceeds lim, as a byte offset, and what
// was exceeded; ok is true when nothing was.
func Complexity(src string, lim Limits) (offset int, what string, ok bool) {
	return Lex(src).Complexity(lim)
}

// Complexity is the package function Complexity on the lexed source.
func (x *Tokens) Complexity(lim Limits) (offset int, what string, ok bool) {
	src, toks := x.src, x.toks
	type frame struct {
		arrows, angles, stmts, ops, items int
		paren                             bool
	}
	frames := []frame{{}}
	tooLong := func(t token) (int, string, bool) {
		return t.start, fmt.Sprintf("more than %d operators in one expression", lim.Operators), false
	}
	for i, t := range toks {
		f := &frames[len(frames)-1]
		if i > 0 && endsStatement(src, toks[i-1], t) {
			f.ops = 0
		}
		if t.kind == kTemplate || t.kind == kIdent && operatorWords[t.name] ||
			t.kind == kPunct && t.name != ";" && t.name != "," && t.name != ")" && t.name != "]" && t.name != "}" {
			if f.ops++; lim.Operators > 0 && f.ops > lim.Operators {
				return tooLong(t)
			}
		}
		if t.kind == kTemplate {
			text := src[t.start:t.end]
			opens := strings.HasSuffix(text, "${")
			closes := text[0] == '}'
			if closes && len(frames) > 1 {
				frames = frames[:len(frames)-1]
			}
			if opens {
				frames = append(frames, frame{})
			}
		}
		if t.depth+1 > lim.Depth || len(frames) > lim.Depth {
			return t.start, fmt.Sprintf("nesting deeper than %d", lim.Depth), false
		}
		switch {
		case t.kind == kPunct:
			switch t.name {
			case "(", "[", "{":
				frames = append(frames, frame{paren: t.name == "("})
			case ")", "]":
				if len(frames) > 1 {
					frames = frames[:len(frames)-1]
				}
			case "}":
				if len(frames) > 1 {
					frames = frames[:len(frames)-1]
				}
				// A block ends what came before it; the items of an enclosing pair of
				// parentheses go on.
				g := &frames[len(frames)-1]
				*g = frame{paren: g.paren, items: g.items}
			case ";":
				*f = frame{paren: f.paren, items: f.items}
			case ",":
				f.arrows, f.stmts, f.ops = 0, 0, 0
				if f.items++; f.paren && lim.Items > 0 && f.items >= lim.Items {
					return t.start, fmt.Sprintf("more than %d items in one pair of parentheses", lim.Items), false
				}
			case "<":
				if f.angles++; f.angles > lim.Angles {
					return t.start, fmt.Sprintf("more than %d `<` in one expression", lim.Angles), false
				}
			case "=":
				// `=>` is lexed as = then >; count it at the =.
				if t.end < len(src) && src[t.end] == '>' {
					if f.arrows++; f.arrows > lim.Arrows {
						return t.start, fmt.Sprintf("more than %d arrow functions chained", lim.Arrows), false
					}
				}
			}
		case t.kind == kIdent:
			switch t.name {
			case "if", "else", "for", "while", "do", "with":
				if f.stmts++; f.stmts > lim.Stmts {
					return t.start, fmt.Sprintf("more than %d statements nested without braces", lim.Stmts), false
				}
			}
		}
	}
	return 0, "", true
}

// endsStatement reports whether a line break between the tokens prev and next ends the
// expression before it, as automatic semicolon insertion does in code written without
// semicolons: prev can end an expression and next can only start a new one. When it is
// not sure, it says no, which only makes the bound on one expression count more.
func endsStatement(src string, prev, next token) bool {
	gap := src[prev.end:next.start]
	if !strings.ContainsAny(gap, "\n\r\u2028\u2029") {
		return false
	}
	switch prev.kind {
	case kPunct:
		if prev.name != ")" && prev.name != "]" && prev.name != "}" {
			return false
		}
	case kIdent:
		if operatorWords[prev.name] {
			return false
		}
	case kTemplate:
		if !strings.HasSuffix(src[prev.start:prev.end], "`") {
			return false
		}
	}
	switch next.kind {
	case kIdent:
		return !operatorWords[next.name] || next.name == "new" || next.name == "typeof" ||
			next.name == "void" || next.name == "delete" || next.name == "await" || next.name == "yield"
	case kNumber, kString, kPrivate:
		return true
	}
	return false
}

// Scan returns the module forms of src in source order.
func Scan(src string) []Finding {
	return Lex(src).Scan()
}

// Scan is the package function Scan on the lexed source.
func (x *Tokens) Scan() []Finding {
	src, toks, comments := x.src, x.toks, x.comments
	var out []Finding
	for _, c := range comments {
		if isDirective(src[c.start:c.end]) {
			out = append(out, Finding{Kind: ReferenceDirective, Offset: c.start, Detail: strings.TrimSpace(src[c.start:c.end])})
		}
	}
	s := scanner{toks: toks}
	for i, t := range toks {
		if t.kind != kIdent || s.punct(i-1, ".") || t.depth > 0 && s.isMemberName(i) {
			continue
		}
		switch t.name {
		case "import":
			if f, ok := s.importForm(i); ok {
				out = append(out, f)
			}
		case "export":
			if t.depth == 0 {
				if f, ok := s.exportForm(i); ok {
					out = append(out, f...)
				}
			}
		}
	}
	sortFindings(out)
	return out
}

func sortFindings(f []Finding) {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j].Offset < f[j-1].Offset; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
}

// isDirective reports a triple-slash directive: three slashes, white space, then a
// <reference …> or <amd-…> tag, as TypeScript recognises them.
func isDirective(c string) bool {
	if !strings.HasPrefix(c, "///") {
		return false
	}
	rest := strings.TrimLeft(c[3:], " \t")
	return strings.HasPrefix(rest, "<reference") || strings.HasPrefix(rest, "<amd-")
}

type scanner struct {
	toks []token
}

func (s *scanner) at(i int) token {
	if i < 0 || i >= len(s.toks) {
		return token{kind: kPunct, name: "", start: -1}
	}
	return s.toks[i]
}

func (s *scanner) punct(i int, p string) bool {
	t := s.at(i)
	return t.kind == kPunct && t.name == p && t.start >= 0
}

func (s *scanner) ident(i int, name string) bool {
	t := s.at(i)
	return t.kind == kIdent && t.name == name
}

// isMemberName reports a keyword used as a property name inside brackets: a key, field or
// method in an object, class, interface or type literal ({import: 1}, import?: string,
// import!: T, import = 1, import() {}). At depth 0 no such body is open.
func (s *scanner) isMemberName(i int) bool {
	n := s.at(i + 1)
	if n.kind == kPunct {
		switch n.name {
		case ":", "?", "!", "=", ";", ",", "}", ")", "<":
			return true
		case "(":
			return s.isMethod(i)
		}
	}
	return false
}

// methodPrefix are the tokens that can precede a method name in a class or object body.
var methodPrefix = map[string]bool{
	"{": true, "}": true, ";": true, ",": true, "*": true,
	"static": true, "async": true, "get": true, "set": true, "public": true, "private": true,
	"protected": true, "readonly": true, "override": true, "abstract": true, "declare": true,
}

// isMethod reports name(…) { … } or name(…): T { … } in a class or object body, which a
// call such as import("m") can never be followed by.
func (s *scanner) isMethod(i int) bool {
	p := s.at(i - 1)
	if p.start < 0 || !methodPrefix[p.name] || p.kind == kString {
		return false
	}
	j := s.matching(i + 1)
	if j < 0 {
		return false
	}
	return s.punct(j+1, "{") || s.punct(j+1, ":")
}

// matching returns the index of the bracket that closes the one at i, or -1.
func (s *scanner) matching(i int) int {
	open := s.at(i)
	if open.kind != kPunct {
		return -1
	}
	for j := i + 1; j < len(s.toks); j++ {
		t := s.toks[j]
		if t.depth == open.depth && t.kind == kPunct && (t.name == ")" || t.name == "]" || t.name == "}") {
			return j
		}
		if t.depth < open.depth {
			return -1
		}
	}
	return -1
}

func (s *scanner) importForm(i int) (Finding, bool) {
	t := s.toks[i]
	f := Finding{Offset: t.start}
	switch n := s.at(i + 1); {
	case n.kind == kPunct && n.name == "(":
		f.Kind, f.Detail = DynamicImport, "import()"
	case n.kind == kPunct && n.name == ".":
		f.Kind, f.Detail = ImportMeta, "import.meta"
	case n.kind == kIdent:
		// import x = …, import type x = …
		j := i + 1
		if n.name == "type" && s.at(j+1).kind == kIdent && s.punct(j+2, "=") {
			j++
		}
		if s.punct(j+1, "=") {
			f.Kind, f.Detail = ImportEquals, "import "+s.at(j).name+" = …"
			return f, true
		}
		f.Kind, f.Detail = ImportDecl, "import"
	case n.kind == kString || n.kind == kPunct && (n.name == "{" || n.name == "*"):
		f.Kind, f.Detail = ImportDecl, "import"
	default:
		return f, false
	}
	return f, true
}

func (s *scanner) exportForm(i int) ([]Finding, bool) {
	at := func(k Kind, j int, detail string) []Finding {
		return []Finding{{Kind: k, Offset: s.at(j).start, Detail: detail}}
	}
	j := i + 1
	declare := false
	if s.ident(j, "declare") {
		declare = true
		j++
	}
	n := s.at(j)
	switch {
	case n.kind == kIdent && n.name == "default":
		return at(ExportDefault, i, "export default"), true
	case n.kind == kPunct && n.name == "=":
		return at(ExportAssignment, i, "export ="), true
	case n.kind == kPunct && n.name == "*":
		return at(Reexport, i, "export *"), true
	case n.kind == kIdent && n.name == "type" && (s.punct(j+1, "{") || s.punct(j+1, "*")):
		if s.punct(j+1, "*") {
			return at(Reexport, i, "export type *"), true
		}
		return s.exportList(i, j+1, true), true
	case n.kind == kPunct && n.name == "{":
		return s.exportList(i, j, false), true
	case n.kind == kIdent && n.name == "import":
		return nil, false // export import x = …: reported as an import-equals
	case n.kind == kIdent && n.name == "as":
		return at(ExportOther, i, "export as namespace"), true
	case n.kind == kIdent && (n.name == "function" || n.name == "async" && s.ident(j+1, "function")):
		async := n.name == "async"
		if async {
			j++
		}
		generator := s.punct(j+1, "*")
		if generator {
			j++
		}
		name := s.at(j + 1)
		if name.kind != kIdent {
			return at(ExportOther, i, "export function"), true
		}
		switch {
		case name.name != "run":
			return at(ExportOther, i, name.name), true
		case declare:
			return at(RunInvalid, i, "an ambient declaration (declare) has no body"), true
		case generator:
			return at(RunInvalid, i, "a generator function"), true
		}
		return []Finding{{Kind: ExportRun, Offset: name.start, Detail: map[bool]string{true: "async", false: "sync"}[async]}}, true
	case n.kind == kIdent:
		// const/let/var/class/abstract class/enum/const enum/namespace/module/interface/type
		k := j + 1
		for s.ident(k, "class") || s.ident(k, "enum") {
			k++
		}
		name := s.at(k)
		if name.kind == kIdent && name.name == "run" {
			return at(RunInvalid, i, "export "+n.name+" run"), true
		}
		if name.kind == kIdent {
			return at(ExportOther, i, name.name), true
		}
		return at(ExportOther, i, "export "+n.name), true
	}
	return at(ExportOther, i, "export"), true
}

// exportList handles export { a, b as c } and export { … } from "m".
func (s *scanner) exportList(exportTok, open int, typeOnly bool) []Finding {
	close := s.matching(open)
	if close < 0 {
		return []Finding{{Kind: ExportOther, Offset: s.toks[exportTok].start, Detail: "export {"}}
	}
	if s.ident(close+1, "from") {
		return []Finding{{Kind: Reexport, Offset: s.toks[exportTok].start, Detail: "export { … } from"}}
	}
	var out []Finding
	for k := open + 1; k < close; k++ {
		t := s.toks[k]
		if t.kind != kIdent && t.kind != kString {
			continue
		}
		if t.kind == kIdent && t.name == "type" && (s.at(k+1).kind == kIdent || s.at(k+1).kind == kString) && !s.ident(k+1, "as") {
			continue // export { type T }
		}
		local := t.name
		exported, pos := local, t.start
		if s.ident(k+1, "as") {
			e := s.at(k + 2)
			exported, pos = e.name, e.start
			if e.kind == kString {
				exported = strings.Trim(e.name, `"'`)
			}
			k += 2
		}
		switch {
		case exported == "default":
			out = append(out, Finding{Kind: ExportDefault, Offset: pos, Detail: "export { " + local + " as default }"})
		case exported == "run" && !typeOnly:
			out = append(out, Finding{Kind: RunInvalid, Offset: pos, Detail: "export { " + local + " }"})
		default:
			out = append(out, Finding{Kind: ExportOther, Offset: pos, Detail: exported})
		}
		for k+1 < close && !s.punct(k+1, ",") {
			k++
		}
	}
	if len(out) == 0 {
		out = append(out, Finding{Kind: ExportOther, Offset: s.toks[exportTok].start, Detail: "export {}"})
	}
	return out
}
