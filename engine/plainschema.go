package engine

import (
	"github.com/agentlibos/libos/internal/jsonexact"
)

// plainSchema is a schema that uses only the keywords most tool schemas use: type,
// properties, required and a boolean additionalProperties (description and title are
// annotations). For such a schema the kernel can tell that a value is valid without
// the JSON Schema library, which converts the whole value to Go maps and checks an
// "integer" through math/big on every call. It only ever accepts: a value it does not
// accept, or one it cannot decide (a number written with a fraction or an exponent
// where the schema says integer), goes to the library, which finds and words the
// violations exactly as before. So the fast check can make a call cheaper, never
// change whether it is refused or how.
type plainSchema struct {
	types    kindSet // nil: any type
	props    map[string]*plainSchema
	required []string
	closed   bool // additionalProperties: false
}

// kindSet is the set of JSON Schema types a plainSchema allows.
type kindSet map[string]bool

// compilePlain returns doc as a plainSchema, or nil when it uses anything else (then
// only the library checks it).
func compilePlain(doc *jsonexact.Value) *plainSchema {
	if doc.Kind != jsonexact.Object {
		return nil
	}
	p := &plainSchema{}
	for i := range doc.O {
		m := &doc.O[i]
		switch m.Key {
		case "description", "title":
			if m.Val.Kind != jsonexact.String {
				return nil
			}
		case "type":
			if p.types = plainTypes(&m.Val); p.types == nil {
				return nil
			}
		case "properties":
			if m.Val.Kind != jsonexact.Object {
				return nil
			}
			p.props = make(map[string]*plainSchema, len(m.Val.O))
			for j := range m.Val.O {
				sub := compilePlain(&m.Val.O[j].Val)
				if sub == nil {
					return nil
				}
				p.props[m.Val.O[j].Key] = sub
			}
		case "required":
			if m.Val.Kind != jsonexact.Array {
				return nil
			}
			for _, r := range m.Val.A {
				if r.Kind != jsonexact.String {
					return nil
				}
				p.required = append(p.required, r.S)
			}
		case "additionalProperties":
			if m.Val.Kind != jsonexact.Bool {
				return nil
			}
			p.closed = !m.Val.B
		default:
			return nil
		}
	}
	return p
}

// plainTypes reads a type keyword: one type name or a non-empty array of them.
func plainTypes(v *jsonexact.Value) kindSet {
	names := []jsonexact.Value{*v}
	if v.Kind == jsonexact.Array {
		names = v.A
	}
	if len(names) == 0 {
		return nil
	}
	set := kindSet{}
	for _, n := range names {
		if n.Kind != jsonexact.String {
			return nil
		}
		switch n.S {
		case "null", "boolean", "object", "array", "number", "integer", "string":
			set[n.S] = true
		default:
			return nil
		}
	}
	return set
}

// accepts reports whether v is certainly valid against p. False means "ask the
// library", not "invalid".
func (p *plainSchema) accepts(v *jsonexact.Value) bool {
	if p.types != nil && !p.types.has(v) {
		return false
	}
	if v.Kind != jsonexact.Object {
		return true
	}
	for _, r := range p.required {
		if _, ok := v.Get(r); !ok {
			return false
		}
	}
	for i := range v.O {
		sub, ok := p.props[v.O[i].Key]
		switch {
		case ok:
			if !sub.accepts(&v.O[i].Val) {
				return false
			}
		case p.closed:
			return false
		}
	}
	return true
}

// has reports whether v's type is in the set. A number is an integer here only when
// written without a fraction or an exponent (1.0 and 1e2 are integers to JSON Schema:
// the library decides those).
func (s kindSet) has(v *jsonexact.Value) bool {
	switch v.Kind {
	case jsonexact.Null:
		return s["null"]
	case jsonexact.Bool:
		return s["boolean"]
	case jsonexact.String:
		return s["string"]
	case jsonexact.Array:
		return s["array"]
	case jsonexact.Object:
		return s["object"]
	case jsonexact.Number:
		return s["number"] || (s["integer"] && plainInteger(v.S))
	}
	return false
}

// plainInteger reports whether a JSON number literal has neither a fraction nor an
// exponent.
func plainInteger(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return lit != ""
}
