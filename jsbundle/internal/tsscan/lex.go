package tsscan

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type kind uint8

const (
	kIdent    kind = iota // identifier or keyword; name is the decoded spelling
	kPunct                // one punctuation byte; name holds it
	kString               // '…' or "…"
	kTemplate             // a template literal piece: `…`, `…${, }…${ or }…`
	kNumber
	kRegExp
	kPrivate // #name
)

// token is one significant token of the source. Comments and white space are not tokens;
// depth counts the brackets ( [ { and template substitutions open where the token starts.
type token struct {
	kind    kind
	start   int
	end     int
	name    string
	escaped bool // an identifier spelled with a \u escape
	depth   int
}

type comment struct {
	start, end int
}

// lexer splits TypeScript into tokens without parsing it. It knows exactly as much of the
// grammar as it must to never mistake the inside of a string, template, comment or regular
// expression for code: division and regular expressions are told apart by the previous
// token, as every JavaScript tokenizer that runs without a parser does.
type lexer struct {
	src      string
	pos      int
	depth    int
	braces   int
	tmpl     []int // brace counts at which a template substitution `${` was opened
	toks     []token
	comments []comment
}

func tokenize(src string) ([]token, []comment) {
	l := &lexer{src: src, toks: make([]token, 0, len(src)/4+16)}
	if strings.HasPrefix(src, "#!") {
		l.skipLine()
	}
	for l.pos < len(l.src) {
		l.next()
	}
	return l.toks, l.comments
}

func (l *lexer) skipLine() {
	for l.pos < len(l.src) {
		if n := lineTerminatorLen(l.src, l.pos); n > 0 {
			return
		}
		l.pos++
	}
}

func lineTerminatorLen(s string, i int) int {
	switch c := s[i]; {
	case c == '\n' || c == '\r':
		return 1
	case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
		return 3
	}
	return 0
}

func (l *lexer) emit(k kind, start int, name string) {
	l.toks = append(l.toks, token{kind: k, start: start, end: l.pos, name: name, depth: l.depth})
}

func (l *lexer) next() {
	s := l.src
	start := l.pos
	c := s[l.pos]
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
		l.pos++
	case c == '/' && l.pos+1 < len(s) && s[l.pos+1] == '/':
		l.skipLine()
		l.comments = append(l.comments, comment{start, l.pos})
	case c == '/' && l.pos+1 < len(s) && s[l.pos+1] == '*':
		end := strings.Index(s[l.pos+2:], "*/")
		if end < 0 {
			l.pos = len(s)
		} else {
			l.pos += 2 + end + 2
		}
		l.comments = append(l.comments, comment{start, l.pos})
	case c == '/' && l.regexpAllowed():
		if !l.regexp(start) {
			l.pos = start + 1
			l.emit(kPunct, start, "/")
		}
	case c == '\'' || c == '"':
		l.str(c)
		l.emit(kString, start, s[start:l.pos])
	case c == '`':
		l.pos++
		l.template(start)
	case c >= '0' && c <= '9' || c == '.' && l.pos+1 < len(s) && s[l.pos+1] >= '0' && s[l.pos+1] <= '9':
		l.number()
		l.emit(kNumber, start, "")
	case c == '#' && l.pos+1 < len(s) && isIdentStartAt(s, l.pos+1):
		l.pos++
		name, _ := l.ident()
		l.emit(kPrivate, start, "#"+name)
	case isIdentStartAt(s, l.pos):
		name, esc := l.ident()
		l.emit(kIdent, start, name)
		l.toks[len(l.toks)-1].escaped = esc
	case c >= utf8.RuneSelf:
		// Non-ASCII white space (NBSP, BOM, LS, PS, Zs) and anything else that is not an
		// identifier: skip the rune.
		_, size := utf8.DecodeRuneInString(s[l.pos:])
		l.pos += size
	default:
		l.punct(c)
	}
}

func (l *lexer) punct(c byte) {
	start := l.pos
	l.pos++
	switch c {
	case '(', '[':
		l.emit(kPunct, start, string(c))
		l.depth++
	case '{':
		l.emit(kPunct, start, "{")
		l.depth++
		l.braces++
	case ')', ']':
		if l.depth > 0 {
			l.depth--
		}
		l.emit(kPunct, start, string(c))
	case '}':
		if n := len(l.tmpl); n > 0 && l.tmpl[n-1] == l.braces {
			l.tmpl = l.tmpl[:n-1]
			if l.depth > 0 {
				l.depth--
			}
			l.template(start)
			return
		}
		if l.depth > 0 {
			l.depth--
		}
		if l.braces > 0 {
			l.braces--
		}
		l.emit(kPunct, start, "}")
	default:
		l.emit(kPunct, start, string(c))
	}
}

// template scans a template piece after its opening ` or }.
func (l *lexer) template(start int) {
	s := l.src
	for l.pos < len(s) {
		switch s[l.pos] {
		case '\\':
			l.pos += 2
		case '`':
			l.pos++
			l.emit(kTemplate, start, "")
			return
		case '$':
			if l.pos+1 < len(s) && s[l.pos+1] == '{' {
				l.pos += 2
				l.emit(kTemplate, start, "")
				l.tmpl = append(l.tmpl, l.braces)
				l.depth++
				return
			}
			l.pos++
		default:
			l.pos++
		}
	}
	l.pos = len(s)
	l.emit(kTemplate, start, "")
}

func (l *lexer) str(q byte) {
	s := l.src
	l.pos++
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case c == q:
			l.pos++
			return
		case c == '\\':
			l.pos++
			if l.pos < len(s) && s[l.pos] == '\r' && l.pos+1 < len(s) && s[l.pos+1] == '\n' {
				l.pos++
			}
			if l.pos < len(s) {
				_, size := utf8.DecodeRuneInString(s[l.pos:])
				l.pos += size
			}
		case c == '\n' || c == '\r':
			return // unterminated; the compiler reports it
		default:
			l.pos++
		}
	}
}

func (l *lexer) number() {
	s := l.src
	hex := l.pos+1 < len(s) && s[l.pos] == '0' && (s[l.pos+1] == 'x' || s[l.pos+1] == 'X')
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '.':
			l.pos++
		case (c == '+' || c == '-') && !hex && (s[l.pos-1] == 'e' || s[l.pos-1] == 'E'):
			l.pos++
		default:
			return
		}
	}
}

// regexp scans a regular expression literal; it reports false (and consumes nothing
// useful) when the line ends first, in which case the slash was a division after all.
func (l *lexer) regexp(start int) bool {
	s := l.src
	l.pos++
	class := false
	for l.pos < len(s) {
		if lineTerminatorLen(s, l.pos) > 0 {
			return false
		}
		c := s[l.pos]
		switch {
		case c == '\\':
			l.pos++
			if l.pos < len(s) && lineTerminatorLen(s, l.pos) > 0 {
				return false
			}
			l.pos++
			continue
		case c == '[':
			class = true
		case c == ']':
			class = false
		case c == '/' && !class:
			l.pos++
			for l.pos < len(s) && isIdentPartAt(s, l.pos) {
				_, size := utf8.DecodeRuneInString(s[l.pos:])
				l.pos += size
			}
			l.emit(kRegExp, start, "")
			return true
		}
		l.pos++
	}
	return false
}

// keywordsBeforeExpression are the words after which a slash starts a regular expression.
var keywordsBeforeExpression = map[string]bool{
	"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true,
	"delete": true, "void": true, "throw": true, "case": true, "do": true, "else": true,
	"yield": true, "await": true, "extends": true,
}

func (l *lexer) regexpAllowed() bool {
	if len(l.toks) == 0 {
		return true
	}
	p := l.toks[len(l.toks)-1]
	switch p.kind {
	case kIdent:
		return keywordsBeforeExpression[p.name]
	case kPunct:
		return p.name != ")" && p.name != "]"
	case kTemplate:
		// `…${ opens an expression; a finished template is a value.
		return strings.HasSuffix(l.src[p.start:p.end], "${")
	}
	return false
}

// ident scans an identifier, decoding \u escapes in its name.
func (l *lexer) ident() (string, bool) {
	s := l.src
	start := l.pos
	for l.pos < len(s) {
		c := s[l.pos]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' {
			l.pos++
			continue
		}
		if c != '\\' && c < utf8.RuneSelf {
			return s[start:l.pos], false // the common case: plain ASCII, no copy
		}
		break
	}
	var b strings.Builder
	b.WriteString(s[start:l.pos])
	esc := false
	for l.pos < len(s) && isIdentPartAt(s, l.pos) {
		if s[l.pos] == '\\' {
			r, n := decodeIdentEscape(s[l.pos:])
			if n == 0 {
				break
			}
			esc = true
			b.WriteRune(r)
			l.pos += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[l.pos:])
		b.WriteRune(r)
		l.pos += size
	}
	return b.String(), esc
}

func decodeIdentEscape(s string) (rune, int) {
	if len(s) < 2 || s[0] != '\\' || s[1] != 'u' {
		return 0, 0
	}
	if len(s) > 2 && s[2] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return 0, 0
		}
		v, err := strconv.ParseUint(s[3:end], 16, 32)
		if err != nil || v > unicode.MaxRune {
			return 0, 0
		}
		return rune(v), end + 1
	}
	if len(s) < 6 {
		return 0, 0
	}
	v, err := strconv.ParseUint(s[2:6], 16, 32)
	if err != nil {
		return 0, 0
	}
	return rune(v), 6
}

func isIdentStartAt(s string, i int) bool {
	c := s[i]
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		return true
	case c == '\\':
		_, n := decodeIdentEscape(s[i:])
		return n > 0
	case c >= utf8.RuneSelf:
		r, _ := utf8.DecodeRuneInString(s[i:])
		return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_ID_Start, r)
	}
	return false
}

func isIdentPartAt(s string, i int) bool {
	c := s[i]
	switch {
	case c >= '0' && c <= '9':
		return true
	case c >= utf8.RuneSelf:
		r, _ := utf8.DecodeRuneInString(s[i:])
		return isIdentStartAt(s, i) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc) || r == 0x200C || r == 0x200D
	}
	return isIdentStartAt(s, i)
}
