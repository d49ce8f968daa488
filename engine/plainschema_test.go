package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// "input schema → … → output schema": a call is refused exactly when the JSON Schema
// library refuses it, and then with the library's details; the plain fast check only
// spares the library a value it would accept. For plain schemas and for ones that are
// not, and for thousands of generated values (integers written as 1.0 or 1e2, missing
// and extra members, nested objects, every type), the fast check never accepts what
// the library refuses, and validate refuses exactly what the library refuses.
func TestPlainSchemaAnswersAsTheLibrary(t *testing.T) {
	schemas := []struct {
		text  string
		plain bool
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`, true},
		{`{"type":"object","properties":{"sum":{"type":"integer","description":"the sum"}},"required":["sum"],"additionalProperties":false,"title":"t"}`, true},
		{`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"type":"object","properties":{"c":{"type":"number"}},"required":["c"]}}}`, true},
		{`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"array"}},"additionalProperties":true}`, true},
		{`{"type":"object"}`, true},
		{`{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}`, false},
		{`{"type":"object","properties":{"a":{"enum":[1,2]}}}`, false},
		{`{"type":"object","properties":{"a":true}}`, false},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, false},
		{`{"type":"object","patternProperties":{"^a":{"type":"string"}},"additionalProperties":false}`, false},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([]jsonexact.Value, 0, 3000)
	for _, text := range []string{`{"a":40,"b":2}`, `{"a":1.0,"b":1e2}`, `{"sum":42}`, `{"sum":-0}`, `{"a":"s","b":{"c":0.5}}`, `{"a":true,"b":[1],"z":null}`, `{}`} {
		v, err := jsonexact.Decode([]byte(text), 64)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	for range 3000 {
		values = append(values, genValue(rng, 0))
	}
	for _, sc := range schemas {
		s, doc, err := compileSchema("t", "input", json.RawMessage(sc.text), 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.text, err)
		}
		plain := compilePlain(&doc)
		if (plain != nil) != sc.plain {
			t.Fatalf("%s: plain = %v, want %v", sc.text, plain != nil, sc.plain)
		}
		fast := 0
		for i := range values {
			v := &values[i]
			libOK := s.Validate(v.ToAny()) == nil
			if got := validate(s, plain, v); (got == nil) != libOK {
				t.Fatalf("schema %s, value %s: validate says %v, the library valid=%v", sc.text, v.Canonical(), got, libOK)
			}
			// What the fast check does not accept goes to the library, whose
			// details are then the library's own.
			if plain != nil && plain.accepts(v) {
				if !libOK {
					t.Fatalf("schema %s, value %s: the fast check accepts what the library refuses", sc.text, v.Canonical())
				}
				fast++
			}
		}
		if sc.plain && fast == 0 {
			t.Errorf("schema %s: the fast check accepted none of the values", sc.text)
		}
	}
}

// genValue makes a random JSON value, mostly objects over the members a, b, c, sum.
func genValue(rng *rand.Rand, depth int) jsonexact.Value {
	nums := []string{"0", "-0", "42", "-7", "1.0", "1e2", "0.5", "-2.5E-3", "123456789012345678901234567890"}
	k := rng.IntN(10)
	if depth == 0 || k >= 6 {
		ms := []jsonexact.Member{}
		for _, key := range []string{"a", "b", "c", "sum", "x"} {
			if rng.IntN(3) > 0 && depth < 3 {
				ms = append(ms, jsonexact.Member{Key: key, Val: genValue(rng, depth+1)})
			}
		}
		return jsonexact.Value{Kind: jsonexact.Object, O: ms}
	}
	switch k {
	case 0:
		return jsonexact.Value{Kind: jsonexact.Null}
	case 1:
		return jsonexact.Boolean(rng.IntN(2) == 0)
	case 2:
		return jsonexact.Str(fmt.Sprint("s", rng.IntN(9)))
	case 3:
		return jsonexact.Value{Kind: jsonexact.Array, A: []jsonexact.Value{genValue(rng, depth+1)}}
	default:
		return jsonexact.Value{Kind: jsonexact.Number, S: nums[rng.IntN(len(nums))]}
	}
}
