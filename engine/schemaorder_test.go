package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// A refusal is recorded (call_rejected, tool_failed) and compared byte for byte, so "the
// same value against the same schema" must be refused with the same details in the same
// order every time, although the JSON Schema library ranges over maps to find them
// (internal/schemaerr).
func TestRefusalDetailsAreTheSameEveryTime(t *testing.T) {
	s, _, err := compileSchema("t", "input", json.RawMessage(`{"type":"object","properties":{
		"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"}},
		"additionalProperties":false}`), 64)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonexact.Decode([]byte(`{"a":1,"b":2,"c":3,"d":4,"x":0,"y":0,"z":0,"w":0,"q":0}`), 64)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	for range 64 {
		d := validate(s, nil, &v)
		if d == nil {
			t.Fatal("the value was accepted: nothing tested")
		}
		texts[fmt.Sprint(d)] = true
	}
	if len(texts) != 1 {
		t.Fatalf("one refusal gave %d different details: %v", len(texts), texts)
	}
}
