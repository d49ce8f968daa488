package diag

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompare: the Skill says "Compare JSON value types and nesting, not textual wire
// bytes, whitespace, number spelling, or key order".
func TestCompare(t *testing.T) {
	cases := []struct {
		rule           string
		sent, returned string
		match          bool
		note           string
	}{
		{"key order does not matter", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true, ""},
		{"whitespace does not matter", `{"a": [1, 2]}`, `{"a":[1,2]}`, true, ""},
		{"number spelling does not matter", `{"n":1.0,"e":1e2}`, `{"n":1,"e":100}`, true, ""},
		{"numbers compare exactly: 2^53+1 is not 2^53", `{"n":9007199254740993}`, `{"n":9007199254740992}`, false, "sent 9007199254740993, returned 9007199254740992"},
		{"a boolean is not a string", `{"b":true}`, `{"b":"true"}`, false, "type differs"},
		{"null is not absent", `{"z":null}`, `{}`, false, "member lost"},
		{"escapes are decoded before comparing", `{"s":"caf\u00e9"}`, `{"s":"café"}`, true, ""},
		{"a lost array element is a difference", `{"l":[1,2]}`, `{"l":[1]}`, false, "2 elements sent, 1 returned"},
		{"an added member is a difference", `{}`, `{"x":1}`, false, "member added"},
		{"nesting is compared", `{"o":{"action":"x"}}`, `{"o":{"action":"y"}}`, false, `sent "x", returned "y"`},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			checks, ok := Compare(json.RawMessage(c.sent), json.RawMessage(c.returned))
			if ok != c.match {
				t.Fatalf("match = %v, want %v: %+v", ok, c.match, checks)
			}
			if c.note == "" {
				return
			}
			for _, ch := range checks {
				if strings.Contains(ch.Note, c.note) && !ch.OK {
					return
				}
			}
			t.Errorf("no failing check notes %q: %+v", c.note, checks)
		})
	}
}

// TestSentinel: the sentinel covers every JSON type the Skill names, 2^53+1, and a
// nested action, and never uses the reserved top-level action key.
func TestSentinel(t *testing.T) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(Sentinel), &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["action"]; ok {
		t.Error("the sentinel uses the reserved top-level action key")
	}
	checks, ok := Compare(json.RawMessage(Sentinel), json.RawMessage(Sentinel))
	if !ok {
		t.Fatal("the sentinel does not match itself")
	}
	kinds := map[string]bool{}
	for _, c := range checks {
		kinds[c.Expected] = true
	}
	for _, k := range []string{"object", "array", "string", "number", "boolean", "null"} {
		if !kinds[k] {
			t.Errorf("the sentinel has no %s", k)
		}
	}
	for _, want := range []string{"9007199254740993", `"nested":{"action"`} {
		if !strings.Contains(Sentinel, want) {
			t.Errorf("the sentinel lacks %s", want)
		}
	}
}
