package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
)

// adapterRuleCases are tools/call params that test the tool-call adapter's rules, as
// the protocol-diagnostics Skill states them, on a real MCP transport. want is echo's
// structured result; "" means the call must fail in protocol normalization
// (protocol_frame, a protocol_rejected event and no tool_called).
var adapterRuleCases = []struct {
	rule, params, want string
}{
	{"the model tool-call adapter trims the function name", `{"name":" echo\t","arguments":{"a":1}}`, `{"a":1}`},
	{"arguments supplied as null ... normalize to {}", `{"name":"echo","arguments":null}`, `{}`},
	{"arguments supplied as ... absent ... normalize to {}", `{"name":"echo"}`, `{}`},
	{"arguments supplied as ... an empty string normalize to {}", `{"name":"echo","arguments":""}`, `{}`},
	{"A JSON string must decode to an object", `{"name":"echo","arguments":"{\"a\":[1,{\"b\":null}]}"}`, `{"a":[1,{"b":null}]}`},
	{"arrays ... are rejected before echo runs (in a string)", `{"name":"echo","arguments":"[1]"}`, ""},
	{"arrays ... are rejected before echo runs", `{"name":"echo","arguments":[1]}`, ""},
	{"scalars ... are rejected before echo runs", `{"name":"echo","arguments":7}`, ""},
	{"booleans ... are rejected before echo runs", `{"name":"echo","arguments":"true"}`, ""},
	{"malformed JSON ... [is] rejected before echo runs", `{"name":"echo","arguments":"{\"a\":"}`, ""},
	{"removes any top-level action argument ... Nested keys named action are ordinary JSON data", `{"name":"echo","arguments":{"action":"x","k":{"action":"y"}}}`, `{"k":{"action":"y"}}`},
	{"The real function name wins over an action supplied in arguments", `{"name":"echo","arguments":{"action":"propose_jit_tool","a":1}}`, `{"a":1}`},
	{"only a missing function name may use that key as a legacy fallback (absent)", `{"arguments":{"action":"echo","a":1}}`, `{"a":1}`},
	{"only a missing function name may use that key as a legacy fallback (empty)", `{"name":"","arguments":{"action":" echo","a":1}}`, `{"a":1}`},
	{"only a missing function name may use that key as a legacy fallback (null)", `{"name":null,"arguments":{"action":"echo","a":1}}`, `{"a":1}`},
	{"Missing/empty function name without a fallback ... fail(s) in protocol normalization (absent)", `{"arguments":{"a":1}}`, ""},
	{"Missing/empty function name without a fallback ... fail(s) in protocol normalization (null)", `{"name":null,"arguments":{"a":1}}`, ""},
	{"Missing/empty function name without a fallback ... fail(s) in protocol normalization (blank)", `{"name":"  ","arguments":{"action":7}}`, ""},
}

// TestAdapterRulesOverMCP: the adapter's rules hold for a tools/call however it
// arrives, over stdio and over streamable HTTP, as they do for OpenAI and Anthropic
// frames: the transport in front of the adapter neither refuses a frame the adapter
// accepts nor accepts one it refuses.
func TestAdapterRulesOverMCP(t *testing.T) {
	check := func(t *testing.T, st *store.Store, pid string, answer func(id int, params string) wireMsg) {
		t.Helper()
		for i, c := range adapterRuleCases {
			before := eventCounts(t, st, pid)
			m := answer(100+i, c.params)
			after := eventCounts(t, st, pid)
			if c.want == "" {
				if m.Error == nil || m.Error.Code != -32602 || m.dataCode() != string(engine.CodeProtocolFrame) {
					t.Errorf("rule %q: %s: %s %+v, want invalid params with code protocol_frame", c.rule, c.params, m.Result, m.Error)
				}
				if after[engine.EventProtocolRejected] != before[engine.EventProtocolRejected]+1 || after[engine.EventToolCalled] != before[engine.EventToolCalled] {
					t.Errorf("rule %q: %s: events went from %v to %v, want one protocol_rejected and no tool_called", c.rule, c.params, before, after)
				}
				continue
			}
			var res struct {
				Structured json.RawMessage `json:"structuredContent"`
			}
			if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || string(res.Structured) != c.want {
				t.Errorf("rule %q: %s: %s %+v, want echo to return %s", c.rule, c.params, m.Result, m.Error, c.want)
			}
			if after[engine.EventToolResult] != before[engine.EventToolResult]+1 {
				t.Errorf("rule %q: %s: events went from %v to %v, want one tool_result", c.rule, c.params, before, after)
			}
		}
	}
	t.Run("stdio", func(t *testing.T) {
		sys, pid, _ := served(t, engine.Direct)
		c := overStdio(t, sys, pid)
		c.initialize()
		check(t, sys.Store(), pid, func(id int, params string) wireMsg {
			return c.call(strconv.Itoa(id), "tools/call", params)
		})
	})
	t.Run("http", func(t *testing.T) {
		sys, pid, url := served(t, engine.Direct)
		sid := session(t, url)
		check(t, sys.Store(), pid, func(id int, params string) wireMsg {
			resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":`+params+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("tools/call %s: HTTP %d %s", params, resp.StatusCode, body)
			}
			return answerOf(t, resp, body)
		})
	})
}

// eventCounts counts pid's events by type.
func eventCounts(t *testing.T, st *store.Store, pid string) map[string]int {
	t.Helper()
	evs, err := st.Events(pid, 0, store.MaxPage)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	return n
}
