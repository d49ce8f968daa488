package wasm

import (
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// "The guest's output is untrusted and is parsed once, where it crosses the
// boundary": an exact output comes with its decoding (Result.Doc), the same text the
// guest wrote; JSON that is not exact (a lone surrogate, which JSON.stringify writes
// as an escape) still comes back as text, without a Doc, for the caller's own exact
// check to refuse; neither is a trap. Arguments given as text are parsed once too,
// where they enter (Run decodes them exactly).
func TestOutputIsDecodedOnceAtTheBoundary(t *testing.T) {
	e := hostTestEngine(t)
	before := jsonexact.Decodes()
	res := mustRun(t, e, `function run() { return {b: [1, "é", null], a: 1.5, s: "x\ny"}; }`, `{}`, nil, Options{})
	if n := jsonexact.Decodes() - before; n != 2 {
		t.Fatalf("a run parsed %d documents, want 2 (its arguments and its output)", n)
	}
	if res.Doc.IsZero() || res.Doc.Text() != string(res.Value) {
		t.Fatalf("Doc = %q, Value = %s", res.Doc.Text(), res.Value)
	}
	if got := string(res.Doc.Value().Canonical()); got != `{"a":1.5,"b":[1,"é",null],"s":"x\ny"}` {
		t.Fatalf("decoded as %s", got)
	}

	res = mustRun(t, e, `function run() { return {s: "\ud800"}; }`, `{}`, nil, Options{})
	if !res.Doc.IsZero() || string(res.Value) != `{"s":"\ud800"}` {
		t.Fatalf("a lone surrogate: Doc %q, Value %s; want no Doc and the guest's text", res.Doc.Text(), res.Value)
	}
}
