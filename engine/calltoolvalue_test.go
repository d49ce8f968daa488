package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
)

// A tools.call hands the kernel the arguments the syscall boundary decoded
// (CallToolValue): "parse a call's arguments once and hand the parsed value down".
// The host API's rules hold for the value as for the text: the top-level action is
// removed (without changing the caller's decoding), null means {}, and what is
// refused (too deep, not an object) is refused exactly as CallTool refuses the text.
func TestCallToolValueAppliesTheHostRules(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Limits: engine.Limits{MaxDepth: 3}})
	h := e.k.Runtime().Tools
	ctx := context.Background()
	call := func(text string) (json.RawMessage, uint64, error, json.RawMessage, error) {
		v, err := jsonexact.Decode([]byte(text), 0)
		if err != nil {
			t.Fatal(err)
		}
		keep := string(v.Compact())
		before := jsonexact.Decodes()
		out, err := h.CallToolValue(ctx, pid, "echo", json.RawMessage(text), v, 1)
		n := jsonexact.Decodes() - before
		if string(v.Compact()) != keep {
			t.Fatalf("CallToolValue changed the caller's value: %s, was %s", v.Compact(), keep)
		}
		textOut, textErr := h.CallTool(ctx, pid, "echo", json.RawMessage(text), 1)
		return out, n, err, textOut, textErr
	}

	out, n, err, textOut, _ := call(`{"a":1,"action":"x","b":{"action":"kept"}}`)
	if err != nil || string(out) != `{"a":1,"b":{"action":"kept"}}` || string(out) != string(textOut) {
		t.Fatalf("CallToolValue = %s, %v; CallTool = %s", out, err, textOut)
	}
	if n != 0 {
		t.Fatalf("CallToolValue parsed %d documents, want none", n)
	}
	if out, _, err, _, _ := call(`null`); err != nil || string(out) != `{}` {
		t.Fatalf("null arguments: %s, %v; want {}", out, err)
	}
	for _, bad := range []string{`{"a":[[[1]]]}`, `[1]`, `"s"`} {
		_, _, err, _, textErr := call(bad)
		if err == nil || codeOf(err) != codeOf(textErr) || err.Error() != textErr.Error() {
			t.Fatalf("%s: CallToolValue refused with %v, CallTool with %v", bad, err, textErr)
		}
	}
}
