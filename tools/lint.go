package tools

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// Portability lint: the JIT authoring Skill's "portable schemas" paragraph, as warnings. Providers
// with a strict projection (OpenAI strict mode among them) accept only closed objects
// whose properties are all required; implicit optional properties are unreliable
// there, so optional values are modelled as required nullable unions. Unbounded
// strings and arrays make a contract the model cannot keep small.

// Warning codes of the schema lint.
const (
	WarnRootNotObject    = "schema_root_not_object"
	WarnOpenObject       = "schema_open_object"
	WarnOptionalProperty = "schema_optional_property"
	WarnUnboundedString  = "schema_unbounded_string"
	WarnUnboundedArray   = "schema_unbounded_array"
	WarnUntyped          = "schema_untyped"
	WarnUnboundedInteger = "schema_unbounded_integer"
)

type linter struct {
	which string
	out   []Diagnostic
}

func (l *linter) warn(code, ptr, format string, args ...any) {
	at := l.which
	if ptr != "" {
		at += ptr
	}
	l.out = append(l.out, Diagnostic{Code: code, Message: at + ": " + fmt.Sprintf(format, args...), Path: at})
}

// lintSchema returns the portability warnings of a schema document (from jsonv).
func lintSchema(which string, doc any) []Diagnostic {
	l := &linter{which: which}
	root, _ := doc.(map[string]any)
	if !hasType(root, "object") {
		l.warn(WarnRootNotObject, "", `the root is not {"type":"object"}; portable contracts are objects`)
	}
	l.walk(root, "", true)
	return l.out
}

func types(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

func hasType(s map[string]any, want string) bool {
	for _, t := range types(s) {
		if t == want {
			return true
		}
	}
	return false
}

// safeBounds reports whether s bounds its numbers on both sides within the integers a
// double holds exactly.
func safeBounds(s map[string]any) bool {
	within := func(keys ...string) bool {
		for _, k := range keys {
			if n, ok := s[k].(json.Number); ok {
				if f, err := n.Float64(); err == nil && f >= -jsonexact.MaxSafeInteger && f <= jsonexact.MaxSafeInteger {
					return true
				}
			}
		}
		return false
	}
	return within("minimum", "exclusiveMinimum") && within("maximum", "exclusiveMaximum")
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// walk lints schema s at JSON pointer ptr. property says s is the schema of an object
// member (or the root), which must say what it accepts.
func (l *linter) walk(s map[string]any, ptr string, property bool) {
	if s == nil {
		return
	}
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	constrained := hasEnum || hasConst
	if property && len(types(s)) == 0 && !constrained {
		composed := false
		for _, k := range []string{"$ref", "anyOf", "oneOf", "allOf"} {
			if _, ok := s[k]; ok {
				composed = true
			}
		}
		if !composed {
			l.warn(WarnUntyped, ptr, `no "type": say exactly which JSON values are allowed`)
		}
	}
	_, hasProps := s["properties"]
	if hasType(s, "object") || hasProps {
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			l.warn(WarnOpenObject, ptr, `set "additionalProperties": false so the object is closed`)
		}
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		if rs, ok := s["required"].([]any); ok {
			for _, r := range rs {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if !required[k] {
				l.warn(WarnOptionalProperty, ptr+"/properties/"+escape(k),
					`property %q is not in "required": list every property and model an optional value as a nullable union such as {"type":["string","null"]}`, k)
			}
			sub, _ := props[k].(map[string]any)
			l.walk(sub, ptr+"/properties/"+escape(k), true)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			l.walk(ap, ptr+"/additionalProperties", true)
		}
	}
	if hasType(s, "string") && !constrained {
		if _, ok := s["maxLength"]; !ok {
			l.warn(WarnUnboundedString, ptr, `a string without "maxLength": bound it`)
		}
	}
	if hasType(s, "integer") && !constrained && !safeBounds(s) {
		l.warn(WarnUnboundedInteger, ptr, `an integer without "minimum" and "maximum" within ±(2^53−1): a JIT tool's numbers are doubles, and a larger one is refused before the tool runs; bound it, or take the number as a string`)
	}
	if hasType(s, "array") && !constrained {
		_, bounded := s["maxItems"]
		if items, ok := s["items"].(bool); ok && !items {
			bounded = true // a closed tuple: prefixItems only
		}
		if !bounded {
			l.warn(WarnUnboundedArray, ptr, `an array without "maxItems": bound it`)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		l.walk(items, ptr+"/items", true)
	}
	for _, key := range []string{"prefixItems", "anyOf", "oneOf", "allOf"} {
		list, _ := s[key].([]any)
		for i, sub := range list {
			m, _ := sub.(map[string]any)
			l.walk(m, fmt.Sprintf("%s/%s/%d", ptr, key, i), key == "prefixItems")
		}
	}
	if defs, ok := s["$defs"].(map[string]any); ok {
		names := make([]string, 0, len(defs))
		for k := range defs {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			m, _ := defs[k].(map[string]any)
			l.walk(m, ptr+"/$defs/"+escape(k), true)
		}
	}
}
