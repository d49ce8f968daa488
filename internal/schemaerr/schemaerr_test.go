package schemaerr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compile(t *testing.T, text string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:t", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:t")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decode(t *testing.T, text string) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(text)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The package's rule: "the same value against the same schema" is refused with the same
// findings in the same order and the same words, every time. The library ranges over
// maps (the instance's members, the schema's properties), so without Canonical a few
// dozen validations of one value give more than one text.
func TestSameRefusalEveryTime(t *testing.T) {
	s := compile(t, `{"type":"object","properties":{
		"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"},
		"e":{"type":"array","items":{"type":"string"}}},
		"additionalProperties":false}`)
	v := decode(t, `{"a":1,"b":2,"c":3,"d":4,"e":[1,2,3,4,5,6,7,8,9,10,11],"x":0,"y":0,"z":0,"w":0,"q":0}`)
	raw, canon := map[string]bool{}, map[string]bool{}
	for range 64 {
		err := s.Validate(v)
		if err == nil {
			t.Fatal("the value was accepted: nothing tested")
		}
		raw[err.Error()] = true
		err = s.Validate(v)
		canon[Canonical(err).Error()] = true
	}
	if len(raw) < 2 {
		t.Logf("the library gave one text in 64 runs this time (it usually gives several)")
	}
	if len(canon) != 1 {
		t.Fatalf("Canonical gave %d different texts for one refusal:\n%s", len(canon), strings.Join(keys(canon), "\n---\n"))
	}
	got := keys(canon)[0]
	if !strings.Contains(got, "additional properties 'q', 'w', 'x', 'y', 'z'") {
		t.Errorf("additional properties not sorted: %s", got)
	}
	// Causes in instance order, array indices as numbers.
	for _, pair := range [][2]string{{"at '/a'", "at '/b'"}, {"at '/d'", "at '/e/0'"}, {"at '/e/2'", "at '/e/10'"}} {
		i, j := strings.Index(got, pair[0]), strings.Index(got, pair[1])
		if i < 0 || j < 0 || i > j {
			t.Errorf("%s should come before %s in:\n%s", pair[0], pair[1], got)
		}
	}
}

// A schema the meta-schema refuses is reported through a SchemaValidationError: its
// findings are put in order too.
func TestSchemaRefusalInOrder(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"properties":{"a":{"type":1},"b":{"type":2},"c":{"minimum":"x"},"d":{"type":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	for range 32 {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("urn:t", doc); err != nil {
			t.Fatal(err)
		}
		_, err := c.Compile("urn:t")
		if err == nil {
			t.Fatal("the schema compiled: nothing tested")
		}
		texts[Canonical(err).Error()] = true
	}
	if len(texts) != 1 {
		t.Fatalf("Canonical gave %d different texts:\n%s", len(texts), strings.Join(keys(texts), "\n---\n"))
	}
}

func TestComparePath(t *testing.T) {
	cases := []struct {
		a, b []string
		want int
	}{
		{[]string{"e", "2"}, []string{"e", "10"}, -1},
		{[]string{"e", "10"}, []string{"e", "2"}, 1},
		{[]string{"a"}, []string{"a", "b"}, -1},
		{[]string{"b"}, []string{"a", "z"}, 1},
		{[]string{"01"}, []string{"1"}, -1},
		{nil, nil, 0},
	}
	for _, c := range cases {
		if got := comparePath(c.a, c.b); (got < 0) != (c.want < 0) || (got > 0) != (c.want > 0) {
			t.Errorf("comparePath(%q, %q) = %d, want sign of %d", c.a, c.b, got, c.want)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
