package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// TestFrame: the adapter must see the name as sent and the arguments bytes exactly as
// they arrived — duplicate keys, number spelling and a missing arguments member
// included — so that its rules, not the SDK's decoding, decide.
func TestFrame(t *testing.T) {
	cases := []struct {
		rule, name, args, frame string
	}{
		{"absent arguments stay absent (the adapter makes them {})", "echo", "", `{"name":"echo"}`},
		{"white space around the name is kept for the adapter to trim", " echo\t", `{}`, `{"name":" echo\t","arguments":{}}`},
		{"argument bytes are passed unchanged", "echo", `{"a":1,"a":2,"n":1.50}`, `{"name":"echo","arguments":{"a":1,"a":2,"n":1.50}}`},
		{"non-object arguments reach the adapter, which refuses them", "echo", `[1]`, `{"name":"echo","arguments":[1]}`},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			f, err := Frame(c.name, json.RawMessage(c.args))
			if err != nil || string(f) != c.frame {
				t.Fatalf("Frame = %s, %v; want %s", f, err, c.frame)
			}
		})
	}
}

// TestSuccess: "results carry structuredContent and text content"; structuredContent
// only when the value is an object, as MCP requires.
func TestSuccess(t *testing.T) {
	r := Success(&engine.Result{Structured: json.RawMessage(`{"a":1}`), Text: `{"a":1}`})
	if string(r.StructuredContent.(json.RawMessage)) != `{"a":1}` || len(r.Content) != 1 {
		t.Errorf("object result: %+v", r)
	}
	r = Success(&engine.Result{Structured: json.RawMessage(`[1]`), Text: `[1]`})
	if r.StructuredContent != nil || len(r.Content) != 1 {
		t.Errorf("array result: %+v", r)
	}
}
