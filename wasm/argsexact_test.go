package wasm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// "Run's text arguments are decoded exactly, as the kernel's are": arguments that are
// JSON the guest's JSON.parse would read, but not exact JSON (a repeated key, whose
// last value would win; a lone surrogate escape; invalid UTF-8; nesting past the bound),
// are refused with args_invalid before the program runs, and the message says what is
// wrong and at which byte. "Only JSON crosses the guest boundary."
func TestRunArgsAreExactJSON(t *testing.T) {
	e := hostTestEngine(t)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// The program would tell that it ran: its syscall reaches the Syscaller.
	const program = `async function run(args, libos) { await libos.syscall("ran", {}); return args; }`
	for _, c := range []struct {
		rule, args string
		// want is the text the message holds: what is wrong and where.
		want string
	}{
		{"a repeated key is refused, not read as its last value", `{"a":1,"a":2}`, `duplicate key "a" at byte 7`},
		{"keys are compared unescaped: \"a\" and \"\\u0061\" are one key", `{"a":1,"\u0061":2}`, `duplicate key "a" at byte 7`},
		{"a repeated key at any depth", `{"x":{"b":[{"c":1,"c":1}]}}`, `duplicate key "c" at byte 18`},
		{"a lone high surrogate escape", `{"s":"ab\ud800"}`, `lone surrogate \ud800 in string at byte 8`},
		{"a lone low surrogate escape", `{"s":"\udc00x"}`, `lone surrogate \udc00 in string at byte 6`},
		{"a high surrogate followed by no low one", `{"s":"\ud800\u0041"}`, `lone surrogate \ud800 in string at byte 6`},
		{"invalid UTF-8 in a string", "{\"s\":\"ok\xff\"}", `invalid UTF-8 in string at byte 8`},
		{"invalid UTF-8 in a key", "{\"\xc3\x28\":1}", `invalid UTF-8 in string at byte 2`},
		{"nesting past the bound", `{"a":` + deep(jsonexact.DefaultMaxDepth) + `}`, `nesting deeper than 128 levels at byte 132`},
		{"not an object", `[1]`, `arguments must be a JSON object, got array`},
		{"null is not an object", `null`, `arguments must be a JSON object, got null`},
		{"trailing data", `{} {}`, `unexpected data after the JSON value at byte 3`},
	} {
		t.Run(c.rule, func(t *testing.T) {
			ran := 0
			sys := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
				ran++
				return json.RawMessage(`null`), nil
			})
			res, err := e.Run(hostCtx(t), program, json.RawMessage(c.args), sys, Options{})
			we := wantError(t, err, CodeArgsInvalid, "")
			if !strings.Contains(we.Message, c.want) {
				t.Errorf("message %q does not say %q", we.Message, c.want)
			}
			if ran != 0 || res == nil || res.Value != nil || res.Stats.Fuel != 0 {
				t.Errorf("the program ran (syscalls %d, result %+v)", ran, res)
			}
		})
	}
	// The bound itself is accepted, and what the program sees is what was sent.
	args := `{"a":` + deep(jsonexact.DefaultMaxDepth-1) + `,"s":"\ud83d\ude00é"}`
	sys := syscallFunc(func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`null`), nil
	})
	res, err := e.Run(hostCtx(t), program, json.RawMessage(args), sys, Options{})
	if err != nil {
		t.Fatalf("arguments nested %d deep: %v", jsonexact.DefaultMaxDepth, err)
	}
	if ok, err := jsonexact.EqualJSON(res.Value, []byte(args)); err != nil || !ok {
		t.Fatalf("the program saw %s, not %s (%v)", res.Value, args, err)
	}
}
