package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
)

// "Parse a call's arguments once and hand the parsed value down": a handler that
// hands its result over as a jsonexact.Doc (Call.Return) has it checked and
// normalised from the value, without a parse; a result in any other bytes is parsed
// and checked as ever; and a Doc gets no bound the text would not: deeper than the
// process's depth limit it is refused as output_invalid, exactly as its text is.
func TestReturnHandsTheResultDown(t *testing.T) {
	var result func(call *engine.Call) json.RawMessage
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{builtin("ret", `{"type":"object"}`, `{"type":"object","required":["n"]}`,
		func(_ context.Context, call *engine.Call) (json.RawMessage, error) { return result(call), nil })}})
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"ret"}, Limits: engine.Limits{MaxDepth: 4}})
	frame := []byte(`{"name":"ret","arguments":{}}`)
	doc := func(text string) jsonexact.Doc {
		d, err := jsonexact.DecodeDoc([]byte(text), 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	run := func(what string, r func(call *engine.Call) json.RawMessage) (*engine.Result, uint64, error) {
		result = r
		before := jsonexact.Decodes()
		res, err := e.k.HandleFrame(context.Background(), pid, frame)
		return res, jsonexact.Decodes() - before, err
	}

	d := doc(`{"z":1.50,"n":"é","a":[true]}`)
	res, parses, err := run("a Doc", func(call *engine.Call) json.RawMessage { return call.Return(d) })
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Structured) != `{"a":[true],"n":"é","z":1.50}` {
		t.Fatalf("normalised to %s", res.Structured)
	}
	if parses != 1 {
		t.Fatalf("a call whose result came as a Doc parsed %d documents, want 1 (the frame)", parses)
	}

	_, parses, err = run("other bytes", func(call *engine.Call) json.RawMessage {
		call.Return(d)
		return json.RawMessage(`{"n":1}`)
	})
	if err != nil || parses != 2 {
		t.Fatalf("a result in other bytes than Return's: %v, %d parses, want it parsed (2)", err, parses)
	}

	_, _, err = run("output schema", func(call *engine.Call) json.RawMessage { return call.Return(doc(`{"a":1}`)) })
	if codeOf(err) != "output_invalid" {
		t.Fatalf("a Doc that misses the output schema: %v, want output_invalid", err)
	}

	deep := `{"n":[[[[1]]]]}`
	_, _, textErr := run("deep text", func(*engine.Call) json.RawMessage { return json.RawMessage(deep) })
	_, _, docErr := run("deep Doc", func(call *engine.Call) json.RawMessage { return call.Return(doc(deep)) })
	if codeOf(textErr) != "output_invalid" || codeOf(docErr) != "output_invalid" {
		t.Fatalf("a result deeper than the limit: as text %v, as a Doc %v; want output_invalid for both", textErr, docErr)
	}
	if !strings.Contains(docErr.Error(), "nesting deeper than 4") || textErr.Error() != docErr.Error() {
		t.Fatalf("a deep Doc is refused as %q, its text as %q", docErr, textErr)
	}
}
