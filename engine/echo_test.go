package engine_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// TestEchoRoundTrip: "Output is the object accepted by the Echo tool. Compare JSON
// value types and nesting". Each case sends a frame through the model path and checks
// the structured result, the text block (the same value), the persisted ToolResult and
// the arguments recorded in tool_called.
func TestEchoRoundTrip(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	cases := []struct {
		name, rule, frame, want string
	}{
		{"nested-arrays", "nested-array preservation",
			`{"name":"echo","arguments":"{\"m\":[[1,[2,[3]]],[],[[]]]}"}`, `{"m":[[1,[2,[3]]],[],[[]]]}`},
		{"booleans-vs-strings", "boolean-vs-string coercion",
			`{"name":"echo","input":{"t":true,"f":false,"st":"true","sf":"false"}}`, `{"f":false,"sf":"false","st":"true","t":true}`},
		{"null", "null is a value, not an absent key",
			`{"name":"echo","arguments":{"n":null,"s":"null"}}`, `{"n":null,"s":"null"}`},
		{"numbers-exact", "numbers keep their exact text (no float64 round trip of 2^53+1)",
			`{"name":"echo","arguments":"{\"big\":9007199254740993,\"neg\":-9007199254740993,\"f\":1.0,\"e\":1E+2,\"z\":-0,\"huge\":1e400,\"i\":12345678901234567890123}"}`,
			`{"big":9007199254740993,"e":1E+2,"f":1.0,"huge":1e400,"i":12345678901234567890123,"neg":-9007199254740993,"z":-0}`},
		{"numbers-vs-strings", "a number and its string spelling stay distinct types",
			`{"name":"echo","input":{"n":1,"s":"1"}}`, `{"n":1,"s":"1"}`},
		{"nested-objects-with-action", "Nested keys named action are ordinary JSON data.",
			`{"name":"echo","input":{"outer":{"action":"keep","inner":{"action":[1]}}}}`, `{"outer":{"action":"keep","inner":{"action":[1]}}}`},
		{"top-level-action-removed", "removes any top-level action argument ... the one important exception to \"unchanged\"",
			`{"name":"echo","input":{"action":"x","k":{"action":"y"}}}`, `{"k":{"action":"y"}}`},
		{"empty-object", "arguments supplied as null, absent, or an empty string normalize to {}",
			`{"name":"echo","arguments":""}`, `{}`},
		{"unicode-and-escapes", "strings round-trip exactly, escapes decoded",
			`{"name":"echo","input":{"s":"\u00e9\ud83d\ude00 \"q\" \\ \n","k\u0000":1}}`, `{"k\u0000":1,"s":"é😀 \"q\" \\ \n"}`},
		{"openai-wrapper", "Call echo once through the same model-facing provider path",
			`{"id":"call_9","type":"function","function":{"name":" echo ","arguments":"{\"list\":[1,\"1\",true,null,{}]}"}}`, `{"list":[1,"1",true,null,{}]}`},
		{"mcp-request", "Call echo once through the same model-facing provider path",
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":{"b":{"c":[false]}}}}}`, `{"a":{"b":{"c":[false]}}}`},
		{"legacy-action-fallback", "only a missing function name may use that key as a legacy fallback",
			`{"arguments":{"action":"echo","x":1}}`, `{"x":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := e.k.HandleFrame(context.Background(), pid, []byte(c.frame))
			if err != nil {
				t.Fatalf("rule %q: %v", c.rule, err)
			}
			if string(r.Structured) != c.want || r.Text != c.want {
				t.Fatalf("rule %q:\nstructured %s\ntext       %s\nwant       %s", c.rule, r.Structured, r.Text, c.want)
			}
			stored, err := e.st.ToolResult(pid, r.CallID)
			if err != nil {
				t.Fatalf("no persisted ToolResult: %v", err)
			}
			if string(stored.Structured) != c.want || stored.Text != c.want || stored.Tool != "echo" {
				t.Fatalf("persisted ToolResult %s / %q, want %s", stored.Structured, stored.Text, c.want)
			}
		})
	}
}

// TestEchoExactNumberEverywhere: 2^53+1 "round-trips unchanged to the tool and back":
// in the handler's arguments, the tool_called event, the structured result, the text
// block and the persisted ToolResult.
func TestEchoExactNumberEverywhere(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	r, err := e.k.HandleFrame(context.Background(), pid, []byte(`{"name":"echo","arguments":"{\"n\":9007199254740993}"}`))
	if err != nil {
		t.Fatal(err)
	}
	const n = "9007199254740993"
	evs := e.events(t, pid)
	called := evs[len(evs)-2]
	if called.Type != engine.EventToolCalled || !strings.Contains(string(called.Data), `"args":{"n":`+n+`}`) {
		t.Fatalf("tool_called does not carry the exact argument: %s", called.Data)
	}
	stored, _ := e.st.ToolResult(pid, r.CallID)
	for what, s := range map[string]string{"structured": string(r.Structured), "text": r.Text, "stored": string(stored.Structured), "stored text": stored.Text} {
		if s != `{"n":`+n+`}` {
			t.Errorf("%s = %s, want the exact number", what, s)
		}
	}
}

// TestEchoEvidence: "Successful Echo calls still create normal audit/event/result
// evidence."
func TestEchoEvidence(t *testing.T) {
	e := newEnv(t, engine.Config{})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	if !regexp.MustCompile(`^pid_[0-9a-f]{32}$`).MatchString(pid) {
		t.Fatalf("PID %q is not pid_ + 128 random bits in hex", pid)
	}
	r, err := e.k.Runtime().Tools.Call(context.Background(), pid, "echo", []byte(`{"a":[1],"action":"dropped"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Structured) != `{"a":[1]}` {
		t.Fatalf("host call result %s", r.Structured)
	}
	if !regexp.MustCompile(`^call_[0-9a-f]{32}$`).MatchString(r.CallID) {
		t.Fatalf("call ID %q", r.CallID)
	}
	evs := e.events(t, pid)
	if got := strings.Join(types(evs), ","); got != "process_spawned,tool_called,tool_result" {
		t.Fatalf("events %s", got)
	}
	if evs[1].CallID != r.CallID || evs[2].CallID != r.CallID {
		t.Fatalf("events do not carry the call ID")
	}
	if field(t, evs[1], "via") != "host" || field(t, evs[1], "tool") != "echo" {
		t.Fatalf("tool_called data %s", evs[1].Data)
	}
	if un, _ := e.st.Unsettled(pid); len(un) != 0 {
		t.Fatalf("call left unsettled")
	}
}
