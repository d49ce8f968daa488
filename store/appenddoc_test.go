package store

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

func mustDoc(t *testing.T, v jsonexact.Value) jsonexact.Doc {
	t.Helper()
	d, err := jsonexact.Encode(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// "Parse a call's arguments once and hand the parsed value down": event data the
// writer holds as a jsonexact.Doc (exact by construction) is stored without being
// parsed again, and reads back exactly as Append of the same text would store it.
func TestAppendDocParsesNothing(t *testing.T) {
	s, _ := openMem(t)
	args, err := jsonexact.Decode([]byte(`{"n":9007199254740993,"s":"<é>"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	data := mustDoc(t, jsonexact.Obj(
		jsonexact.Member{Key: "call_id", Val: jsonexact.Str("c1")},
		jsonexact.Member{Key: "args", Val: args},
	))
	before := jsonexact.Decodes()
	e, err := s.AppendDoc(ctx, "p", EventToolCalled, data)
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonexact.Decodes() - before; n != 0 {
		t.Fatalf("AppendDoc parsed %d documents", n)
	}
	if e.CallID != "c1" || string(e.Data) != data.Text() {
		t.Fatalf("appended %+v", e)
	}
	open, err := s.Unsettled("p")
	if err != nil || len(open) != 1 {
		t.Fatalf("tool_called of a Doc does not open the call: %v, %v", open, err)
	}
	raw := mustAppend(t, s, "p", "note", data.Text())
	if string(raw.Data) != string(e.Data) {
		t.Fatalf("Append stored %s, AppendDoc %s", raw.Data, e.Data)
	}
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Event("p", e.Seq)
	if err != nil || got.CallID != "c1" || string(got.Data) != data.Text() {
		t.Fatalf("read back %+v, %v", got, err)
	}
}

// The store's rules for event data hold for a Doc as for raw text: an object, a
// string call_id on tool_called and its settlements, a valid call ID. Each refusal is
// the typed invalid error, and nothing is appended.
func TestAppendDocKeepsTheEventRules(t *testing.T) {
	s, _ := openMem(t)
	str := func(k, v string) jsonexact.Member { return jsonexact.Member{Key: k, Val: jsonexact.Str(v)} }
	for _, tc := range []struct {
		name, typ string
		v         jsonexact.Value
	}{
		{"event data must be a JSON object: array", "note", jsonexact.Strs([]string{"a"})},
		{"event data must be a JSON object: scalar", "note", jsonexact.Int(1)},
		{"tool_called needs call_id", EventToolCalled, jsonexact.Obj()},
		{"tool_result needs a string call_id", EventToolResult, jsonexact.Obj(jsonexact.Member{Key: "call_id", Val: jsonexact.Int(7)})},
		{"call_id must not be empty", EventToolFailed, jsonexact.Obj(str("call_id", ""))},
		{"call_id has no control characters", EventToolCalled, jsonexact.Obj(str("call_id", "a\x00b"))},
		{"another event's call_id is checked too", "note", jsonexact.Obj(str("call_id", "a\nb"))},
		{"empty type", "", jsonexact.Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AppendDoc(ctx, "p", tc.typ, mustDoc(t, tc.v))
			wantCode(t, err, CodeInvalid)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v is not ErrInvalid", err)
			}
		})
	}
	if h, _ := s.Head("p"); h.Seq != 0 {
		t.Fatalf("rejected appends left events: head %d", h.Seq)
	}
	// The zero Doc is no data: {} as for Append(nil).
	e, err := s.AppendDoc(ctx, "p", "note", jsonexact.Doc{})
	if err != nil || string(e.Data) != "{}" {
		t.Fatalf("AppendDoc(zero) = %s, %v", e.Data, err)
	}
}

// Every other writer keeps the store's guarantee: raw data is parsed exactly, and a
// document that is not exact JSON is refused with the typed invalid error, whether or
// not the same writer also appends Docs.
func TestAppendStillChecksRawData(t *testing.T) {
	s, _ := openMem(t)
	for _, bad := range []string{`{"a":1,"a":2}`, `{"s":"\ud800"}`, "{\"s\":\"\xff\"}", `{"a":[}`, `{} {}`} {
		before := jsonexact.Decodes()
		_, err := s.Append(ctx, "p", "note", json.RawMessage(bad))
		wantCode(t, err, CodeInvalid)
		if jsonexact.Decodes() == before {
			t.Fatalf("Append refused %s without parsing it", bad)
		}
	}
	if h, _ := s.Head("p"); h.Seq != 0 {
		t.Fatalf("rejected appends left events: head %d", h.Seq)
	}
}
