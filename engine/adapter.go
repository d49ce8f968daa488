package engine

import (
	"strings"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// The tool-call adapter turns one provider frame into a normalised call: a function name
// and an arguments object. It runs before any lookup or dispatch, and every failure here
// is a protocol-frame failure (CodeProtocolFrame), never a tool failure.
//
// Accepted shapes (keys are matched case-sensitively; an unknown key is refused):
//
//	OpenAI chat tool call    {"id"?, "type":"function", "function":{"name","arguments":"<json>"}}
//	OpenAI Responses item    {"type":"function_call", "id"?, "call_id"?, "status"?, "name", "arguments":"<json>"}
//	Anthropic tool_use       {"type":"tool_use"?, "id"?, "name", "input":{…}}
//	MCP tools/call params    {"name", "arguments":{…}, "_meta"?}  (or the whole JSON-RPC request)
//	plain                    {"name", "arguments": {…} | "<json>"}
//
// The rules, in the words of the protocol-diagnostics Skill: the adapter "trims the function name, parses
// arguments as an object, removes any top-level action argument, and injects the
// selected function name as the internal action. The real function name wins over an
// action supplied in arguments; only a missing function name may use that key as a
// legacy fallback." Arguments "supplied as null, absent, or an empty string normalize
// to {}. A JSON string must decode to an object; arrays, scalars, booleans, and
// malformed JSON are rejected".

// actionKey is the reserved top-level protocol key.
const actionKey = "action"

// maxNameBytes bounds a function name; longer names are not names but payloads.
const maxNameBytes = 256

// asciiSpace is the white space a tool name is trimmed of: tab, line feed, form feed,
// carriage return and space, as in the WHATWG's "ASCII whitespace".
const asciiSpace = "\t\n\f\r "

// ToolName is the one rule for a tool name on every path it takes (a model frame, the
// legacy action fallback, run_jit_tool's tool_name, the host API and tools.call
// syscalls): surrounding ASCII white space is trimmed, as the protocol-diagnostics Skill
// says ("the function name is trimmed of surrounding white space"), and nothing else is
// changed. Unicode spaces (U+00A0, U+3000, U+2028, U+0085), vertical tab, other case or
// another normal form are not the name: the lookup that follows is exact, so they are
// unknown tools.
func ToolName(s string) string { return strings.Trim(s, asciiSpace) }

// SameToolName reports whether a and b are one name to a reader: equal under Unicode case
// folding (Echo, ECHO and echo; the Kelvin sign and k). Lookup stays exact, so a name that
// differs only so would reach one tool or another depending on its case; registration
// refuses it instead.
func SameToolName(a, b string) bool { return strings.EqualFold(a, b) }

// envelopeDepth is how far below the frame's root the arguments object may sit
// (JSON-RPC request → params → arguments).
const envelopeDepth = 2

// normalized is one call after the adapter.
type normalized struct {
	name       string          // selected function name, trimmed
	fromAction bool            // the name came from the legacy top-level action
	args       jsonexact.Value // object, without top-level action
	argBytes   int             // size of the raw arguments as received
	dropped    bool            // a top-level action was removed
}

type adapterLimits struct {
	maxDepth      int // nesting bound of the arguments object
	maxFrameBytes int
}

// frameFields is every key the adapter understands at some level of a frame.
var frameFields = []string{"name", "arguments", "input", "id", "call_id", "type", "function", "status", "index", "_meta", "jsonrpc", "method", "params"}

func protocolErr(format string, args ...any) *Error {
	return errorf(CodeProtocolFrame, "protocol frame: "+format, args...)
}

func normalizeFrame(frame []byte, lim adapterLimits) (normalized, error) {
	if lim.maxFrameBytes > 0 && len(frame) > lim.maxFrameBytes {
		return normalized{}, errorf(CodeLimitExceeded, "protocol frame: frame is %d bytes, more than the %d-byte frame limit", len(frame), lim.maxFrameBytes)
	}
	root, err := jsonexact.Decode(frame, lim.maxDepth+envelopeDepth)
	if err != nil {
		return normalized{}, decodeErr("frame", err)
	}
	if root.Kind != jsonexact.Object {
		return normalized{}, protocolErr("a frame must be a JSON object, got %s", root.Kind)
	}
	return normalizeEnvelope(&root, lim)
}

func decodeErr(what string, err error) *Error {
	e := protocolErr("%s is not exact JSON: %v", what, err)
	e.Err = err
	return e
}

// checkKeys refuses keys outside allowed, naming the intended key when the refused one
// differs only in case: keys are matched case-sensitively, never folded.
func checkKeys(obj *jsonexact.Value, where string, allowed ...string) error {
	for _, m := range obj.O {
		ok := false
		for _, a := range allowed {
			if m.Key == a {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		for _, a := range frameFields {
			if strings.EqualFold(m.Key, a) {
				return protocolErr("%s key %q is not %q: frame keys are case-sensitive", where, m.Key, a)
			}
		}
		return protocolErr("unexpected %s key %q", where, m.Key)
	}
	return nil
}

func normalizeEnvelope(root *jsonexact.Value, lim adapterLimits) (normalized, error) {
	// A whole JSON-RPC tools/call request: unwrap to its params.
	if _, ok := root.Get("method"); ok {
		if err := checkKeys(root, "JSON-RPC request", "jsonrpc", "id", "method", "params"); err != nil {
			return normalized{}, err
		}
		if m, _ := root.Get("method"); m.Kind != jsonexact.String || m.S != "tools/call" {
			return normalized{}, protocolErr("a JSON-RPC frame must have method \"tools/call\"")
		}
		params, ok := root.Get("params")
		if !ok || params.Kind != jsonexact.Object {
			return normalized{}, protocolErr("a tools/call request needs a params object")
		}
		if err := checkKeys(params, "tools/call params", "name", "arguments", "_meta"); err != nil {
			return normalized{}, err
		}
		return normalizeCall(params, "arguments", lim)
	}
	// OpenAI chat wrapper: {"type":"function","function":{name, arguments}}.
	if fn, ok := root.Get("function"); ok {
		if err := checkKeys(root, "frame", "id", "type", "function", "index"); err != nil {
			return normalized{}, err
		}
		if t, ok := root.Get("type"); ok && (t.Kind != jsonexact.String || t.S != "function") {
			return normalized{}, protocolErr("a frame with a function object must have type \"function\"")
		}
		if fn.Kind != jsonexact.Object {
			return normalized{}, protocolErr("function must be an object, got %s", fn.Kind)
		}
		if err := checkKeys(fn, "function", "name", "arguments"); err != nil {
			return normalized{}, err
		}
		return normalizeCall(fn, "arguments", lim)
	}
	if err := checkKeys(root, "frame", "name", "arguments", "input", "id", "call_id", "type", "status", "_meta"); err != nil {
		return normalized{}, err
	}
	if id, ok := root.Get("id"); ok && id.Kind != jsonexact.String && id.Kind != jsonexact.Number && id.Kind != jsonexact.Null {
		return normalized{}, protocolErr("id must be a string or a number, got %s", id.Kind)
	}
	argsKey := "arguments"
	_, hasArgs := root.Get("arguments")
	_, hasInput := root.Get("input")
	if hasArgs && hasInput {
		return normalized{}, protocolErr("a frame carries either arguments or input, not both")
	}
	if hasInput {
		argsKey = "input"
	}
	if t, ok := root.Get("type"); ok {
		switch {
		case t.Kind != jsonexact.String:
			return normalized{}, protocolErr("type must be a string, got %s", t.Kind)
		case t.S == "tool_use" && !hasArgs, t.S == "function_call" && !hasInput:
		default:
			return normalized{}, protocolErr("frame type %q does not fit this frame", t.S)
		}
	}
	return normalizeCall(root, argsKey, lim)
}

// normalizeCall applies adapter rules 1–4 to an object holding name and arguments.
func normalizeCall(obj *jsonexact.Value, argsKey string, lim adapterLimits) (normalized, error) {
	var n normalized

	// Rule 1: the function name is trimmed of surrounding white space.
	if v, ok := obj.Get("name"); ok {
		switch v.Kind {
		case jsonexact.Null:
		case jsonexact.String:
			n.name = ToolName(v.S)
		default:
			return n, protocolErr("name must be a string, got %s", v.Kind)
		}
	}
	if len(n.name) > maxNameBytes {
		return n, protocolErr("function name is %d bytes, more than %d", len(n.name), maxNameBytes)
	}

	// Rule 2: absent, null and "" become {}; a string must decode to an object.
	args := jsonexact.Value{Kind: jsonexact.Object, O: []jsonexact.Member{}}
	if v, ok := obj.Get(argsKey); ok {
		switch v.Kind {
		case jsonexact.Null:
		case jsonexact.String:
			if v.S != "" {
				n.argBytes = len(v.S)
				dec, err := jsonexact.DecodeString(v.S, lim.maxDepth)
				if err != nil {
					return n, decodeErr(argsKey+" string", err)
				}
				if dec.Kind != jsonexact.Object {
					return n, protocolErr("%s must decode to a JSON object, got %s", argsKey, dec.Kind)
				}
				args = dec
			}
		case jsonexact.Object:
			// Already decoded (Anthropic input, MCP arguments): same rule, same bounds.
			if d := depth(v); d > lim.maxDepth {
				return n, protocolErr("%s nest deeper than %d levels", argsKey, lim.maxDepth)
			}
			n.argBytes = len(v.Compact())
			args = *v
		default:
			return n, protocolErr("%s must be a JSON object or a string holding one, got %s", argsKey, v.Kind)
		}
	}

	// Rule 3: the top-level action is removed; the real name wins; a string action is
	// the legacy fallback only when the name is missing or empty.
	var action *jsonexact.Value
	if a, ok := args.Get(actionKey); ok {
		saved := *a
		action = &saved
		args.Remove(actionKey) // the decoded frame is ours: remove in place
		n.dropped = true
	}
	if n.name == "" {
		if action == nil || action.Kind != jsonexact.String || ToolName(action.S) == "" {
			if action == nil {
				return n, protocolErr("function name is missing or empty and there is no top-level action to fall back on")
			}
			return n, protocolErr("function name is missing or empty and the top-level action fallback is not a non-empty string")
		}
		n.name = ToolName(action.S)
		n.fromAction = true
		if len(n.name) > maxNameBytes {
			return n, protocolErr("function name is %d bytes, more than %d", len(n.name), maxNameBytes)
		}
	}
	n.args = args
	return n, nil
}

// depth returns the nesting depth of v: 0 for a scalar, 1 for a flat container.
func depth(v *jsonexact.Value) int {
	d := 0
	switch v.Kind {
	case jsonexact.Array:
		for i := range v.A {
			d = max(d, depth(&v.A[i]))
		}
	case jsonexact.Object:
		for i := range v.O {
			d = max(d, depth(&v.O[i].Val))
		}
	default:
		return 0
	}
	return d + 1
}
