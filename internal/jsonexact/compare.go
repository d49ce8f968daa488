package jsonexact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentlibos/libos/liberr"
)

// DecodeAny parses data as exactly one JSON value (Decode's rules) in the shape
// encoding/json gives with UseNumber: objects become map[string]any, arrays []any,
// numbers json.Number. Equal, Diff and KindOf take this shape.
func DecodeAny(data []byte, maxDepth int) (any, error) {
	v, err := Decode(data, maxDepth)
	if err != nil {
		return nil, err
	}
	return v.ToAny(), nil
}

// Equal reports whether a and b (from DecodeAny) are the same JSON value: numbers by
// decimal value, object members in any order, everything else exactly.
func Equal(a, b any) bool {
	_, _, same := Diff(a, b)
	return same
}

// Diff compares want with got and, when they differ, returns the JSON path of the
// first difference (object keys in sorted order) and what differs there.
func Diff(want, got any) (path, what string, same bool) {
	var b strings.Builder
	b.WriteString("$")
	what = diff(&b, want, got)
	if what == "" {
		return "", "", true
	}
	return b.String(), what, false
}

func diff(p *strings.Builder, want, got any) string {
	if kw, kg := KindOf(want), KindOf(got); kw != kg {
		return fmt.Sprintf("expected %s %s, observed %s %s", kw, Short(want, 80), kg, Short(got, 80))
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, inW := w[k]
			gv, inG := g[k]
			mark := p.Len()
			writeKey(p, k)
			switch {
			case !inG:
				return "expected member missing from the observed value"
			case !inW:
				return "observed member " + Short(gv, 80) + " is not in expected"
			}
			if d := diff(p, wv, gv); d != "" {
				return d
			}
			truncate(p, mark)
		}
	case []any:
		g := got.([]any)
		for i := 0; i < len(w) && i < len(g); i++ {
			mark := p.Len()
			fmt.Fprintf(p, "[%d]", i)
			if d := diff(p, w[i], g[i]); d != "" {
				return d
			}
			truncate(p, mark)
		}
		if len(w) != len(g) {
			return fmt.Sprintf("expected an array of %d items, observed %d", len(w), len(g))
		}
	case json.Number:
		if !NumberEqual(string(w), string(got.(json.Number))) {
			return fmt.Sprintf("expected %s, observed %s", w, got)
		}
	case string:
		if w != got.(string) {
			return fmt.Sprintf("expected %s, observed %s", Short(w, 80), Short(got, 80))
		}
	case bool:
		if w != got.(bool) {
			return fmt.Sprintf("expected %v, observed %v", w, got)
		}
	}
	return ""
}

// truncate rewinds a builder to n bytes (strings.Builder cannot shrink).
func truncate(p *strings.Builder, n int) {
	s := p.String()[:n]
	p.Reset()
	p.WriteString(s)
}

func writeKey(p *strings.Builder, k string) {
	if ident(k) {
		p.WriteString(".")
		p.WriteString(k)
		return
	}
	p.WriteString("[")
	p.WriteString(strconv.Quote(k))
	p.WriteString("]")
}

func ident(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_' || r == '$' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// KindOf names the JSON type of v.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return fmt.Sprintf("%T", v)
}

// NumberEqual compares two JSON number texts by decimal value, exactly.
func NumberEqual(a, b string) bool {
	if a == b {
		return true
	}
	da, okA := normalize(a)
	db, okB := normalize(b)
	return okA && okB && da == db
}

// decimal is a number as sign, significant digits (no leading or trailing zeros) and
// the exponent of the last digit. Zero is {"", 0, false}.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

func normalize(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if hasExp {
		e, err := strconv.ParseInt(expPart, 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return d, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if trimmed == "" {
		return decimal{}, true // every zero is zero, whatever its sign
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}

// EqualJSON decodes both texts exactly and compares them by value.
func EqualJSON(a, b []byte) (bool, error) {
	va, err := DecodeAny(a, 0)
	if err != nil {
		return false, err
	}
	vb, err := DecodeAny(b, 0)
	if err != nil {
		return false, err
	}
	return Equal(va, vb), nil
}

// ShortText renders a JSON text for a message: compacted when it is valid JSON, cut to
// at most max bytes.
func ShortText(data []byte, max int) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		buf.Reset()
		buf.Write(data)
	}
	return liberr.Clip(buf.String(), max)
}

// Short renders v as compact JSON of at most max bytes, cut with an ellipsis.
func Short(v any, max int) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return liberr.Clip(string(b), max)
}
