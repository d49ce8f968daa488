package syscalls

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// step is one syscall a simulated guest makes, and what the test expects of it.
type step struct {
	name, args string
	// wantCode is the code the call must reject with; "" means it must resolve with
	// wantResult.
	wantCode    string
	wantMessage string // verbatim message, when set
	wantResult  string
}

func mustParseTape(t *testing.T, s string) []TapeEntry {
	t.Helper()
	es, err := ParseTape([]byte(s))
	if err != nil {
		t.Fatalf("ParseTape: %v", err)
	}
	return es
}

func TestTapeSemantics(t *testing.T) {
	const clockUTC = `{"name":"clock.now","args":{"timezone":"UTC"},"result":{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}}`
	const clockResult = `{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}`
	const tokyoResult = `{"iso8601":"2026-01-02T12:04:05+09:00","unix_seconds":1767323045,"timezone":"Asia/Tokyo"}`
	cases := []struct {
		rule  string
		tape  string
		steps []step
		// finish is the code Finish must return; "" means the test passes.
		finish    string
		finishHas []string // substrings the failure message must contain
	}{
		{
			rule:  "seed: the clock.now example, entry consumed with its result",
			tape:  `[` + clockUTC + `]`,
			steps: []step{{name: "clock.now", args: `{"timezone":"UTC"}`, wantResult: clockResult}},
		},
		{
			rule: "Entries are consumed in order",
			tape: `[{"name":"clock.now","args":{"timezone":"UTC"},"result":` + clockResult + `},{"name":"clock.now","args":{"timezone":"Asia/Tokyo"},"result":` + tokyoResult + `}]`,
			steps: []step{
				{name: "clock.now", args: `{"timezone":"UTC"}`, wantResult: clockResult},
				{name: "clock.now", args: `{"timezone":"Asia/Tokyo"}`, wantResult: tokyoResult},
			},
		},
		{
			rule:      "A name mismatch rejects at that call; the message names the entry index, expected vs observed",
			tape:      `[{"name":"clock.today","args":{"timezone":"UTC"},"result":{}}]`,
			steps:     []step{{name: "clock.now", args: `{"timezone":"UTC"}`, wantCode: CodeTapeMismatch}},
			finish:    CodeTapeMismatch,
			finishHas: []string{"entry 0", "expected clock.today", "observed clock.now"},
		},
		{
			rule:      "An args mismatch rejects at that call; the message names expected vs observed args",
			tape:      `[{"name":"clock.now","args":{"timezone":"Etc/UTC"},"result":` + clockResult + `}]`,
			steps:     []step{{name: "clock.now", args: `{"timezone":"UTC"}`, wantCode: CodeTapeMismatch}},
			finish:    CodeTapeMismatch,
			finishHas: []string{"entry 0", `expected args {"timezone":"Etc/UTC"}`, `observed {"timezone":"UTC"}`},
		},
		{
			rule:  "args compare by JSON value: key order and number spelling do not matter",
			tape:  `[{"name":"tools.call","args":{"arguments":{"nested":{"action":"keep"},"n":1.0},"tool":"echo"},"result":{"ok":true}}]`,
			steps: []step{{name: "tools.call", args: `{"tool":"echo","arguments":{"n":1,"nested":{"action":"keep"}}}`, wantResult: `{"ok":true}`}},
		},
		{
			rule:   "args compare types: the string \"1\" is not the number 1",
			tape:   `[{"name":"kv.put","args":{"key":"k","value":1},"result":{}}]`,
			steps:  []step{{name: "kv.put", args: `{"key":"k","value":"1"}`, wantCode: CodeTapeMismatch}},
			finish: CodeTapeMismatch,
		},
		{
			rule:   "args compare nesting: an extra nested key is a mismatch",
			tape:   `[{"name":"kv.put","args":{"key":"k","value":{"a":1}},"result":{}}]`,
			steps:  []step{{name: "kv.put", args: `{"key":"k","value":{"a":1,"b":2}}`, wantCode: CodeTapeMismatch}},
			finish: CodeTapeMismatch,
		},
		{
			rule:  "args are optional: an entry without args accepts any valid arguments",
			tape:  `[{"name":"clock.now","result":` + clockResult + `}]`,
			steps: []step{{name: "clock.now", args: `{"timezone":"Europe/Paris"}`, wantResult: clockResult}},
		},
		{
			rule:      "extra call: a call beyond the tape rejects at the call",
			tape:      `[]`,
			steps:     []step{{name: "clock.now", args: `{"timezone":"UTC"}`, wantCode: CodeTapeMismatch}},
			finish:    CodeTapeMismatch,
			finishHas: []string{"call 0", "clock.now", "no entry left"},
		},
		{
			rule:      "leftovers fail the test",
			tape:      `[` + clockUTC + `,` + clockUTC + `]`,
			steps:     []step{{name: "clock.now", args: `{"timezone":"UTC"}`, wantResult: clockResult}},
			finish:    CodeTapeLeftover,
			finishHas: []string{"1 of 2 entries left over", "entry 1", "clock.now"},
		},
		{
			rule:  "payload is an alias of result",
			tape:  `[{"name":"kv.get","args":{"key":"hits"},"payload":{"found":true,"value":7}}]`,
			steps: []step{{name: "kv.get", args: `{"key":"hits"}`, wantResult: `{"found":true,"value":7}`}},
		},
		{
			rule: "ok:false with error as a string rejects with that message, verbatim",
			tape: `[{"name":"kv.get","args":{"key":"a"},"ok":false,"error":"store offline"}]`,
			steps: []step{{name: "kv.get", args: `{"key":"a"}`,
				wantCode: CodeProviderFailed, wantMessage: "store offline"}},
		},
		{
			rule: "an error string that is a code is the code as well as the message",
			tape: `[{"name":"kv.get","args":{"key":"a"},"ok":false,"error":"capability_denied"}]`,
			steps: []step{{name: "kv.get", args: `{"key":"a"}`,
				wantCode: CodeCapabilityDenied, wantMessage: "capability_denied"}},
		},
		{
			rule: "ok:false with error as {code, message} rejects with both, verbatim; a denial caught on purpose passes",
			tape: `[{"name":"clock.now","args":{"timezone":"UTC"},"ok":false,"error":{"code":"capability_denied","message":"clock:now is not granted"}}]`,
			steps: []step{{name: "clock.now", args: `{"timezone":"UTC"}`,
				wantCode: CodeCapabilityDenied, wantMessage: "clock:now is not granted"}},
		},
		{
			rule: "a mismatch marks the test failed even if the guest catches the rejection and goes on",
			tape: `[{"name":"kv.get","args":{"key":"x"},"result":{"found":false,"value":null}}]`,
			steps: []step{
				{name: "clock.now", args: `{"timezone":"UTC"}`, wantCode: CodeTapeMismatch},
				// The guest swallowed the rejection and tried the entry's call: the tape
				// stays failed.
				{name: "kv.get", args: `{"key":"x"}`, wantCode: CodeTapeMismatch},
			},
			finish:    CodeTapeMismatch,
			finishHas: []string{"entry 0", "expected kv.get", "observed clock.now"},
		},
		{
			rule:   "an unknown route is rejected with the fixed unknown_syscall error even when the tape names it",
			tape:   `[{"name":"clock.today","result":{}}]`,
			steps:  []step{{name: "clock.today", args: `{}`, wantCode: CodeUnknownSyscall, wantMessage: unknownSyscallMessage}},
			finish: CodeUnknownSyscall,
		},
		{
			rule:      "arguments production would refuse fail the test: the tape proves logic production can run",
			tape:      `[{"name":"clock.now","result":` + clockResult + `}]`,
			steps:     []step{{name: "clock.now", args: `{"tz":"UTC"}`, wantCode: CodeArgumentInvalid}},
			finish:    CodeArgumentInvalid,
			finishHas: []string{"entry 0", "clock.now"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			tape, err := NewTape(mustParseTape(t, tc.tape))
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				res, err := tape.Syscall(context.Background(), s.name, json.RawMessage(s.args))
				if s.wantCode == "" {
					if err != nil {
						t.Fatalf("step %d: unexpected error %v", i, err)
					}
					if eq, _ := equalJSON(res, []byte(s.wantResult)); !eq {
						t.Fatalf("step %d: result %s, want %s", i, res, s.wantResult)
					}
					continue
				}
				var se *Error
				if !errors.As(err, &se) || string(se.Code) != s.wantCode {
					t.Fatalf("step %d: error %v, want code %s", i, err, s.wantCode)
				}
				if s.wantMessage != "" && se.Message != s.wantMessage {
					t.Fatalf("step %d: message %q, want %q", i, se.Message, s.wantMessage)
				}
			}
			err = tape.Finish()
			if tc.finish == "" {
				if err != nil {
					t.Fatalf("Finish: %v, want the test to pass", err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || string(se.Code) != tc.finish {
				t.Fatalf("Finish: %v, want code %s", err, tc.finish)
			}
			for _, sub := range tc.finishHas {
				if !strings.Contains(se.Message, sub) {
					t.Errorf("Finish message %q does not contain %q", se.Message, sub)
				}
			}
		})
	}
}

func TestTapeEntryDecoding(t *testing.T) {
	bad := []struct{ rule, entry, has string }{
		{"an entry needs result/payload or ok:false+error", `{"name":"clock.now"}`, "needs"},
		{"result and payload are aliases; both is ambiguous", `{"name":"a.b","result":1,"payload":1}`, "same field"},
		{"ok:false needs error", `{"name":"a.b","ok":false}`, "needs"},
		{"error needs ok:false", `{"name":"a.b","error":"x"}`, "ok"},
		{"ok:false excludes result", `{"name":"a.b","ok":false,"error":"x","result":1}`, "not"},
		{"unknown keys are rejected, not ignored", `{"name":"a.b","results":1}`, "unknown key"},
		{"duplicate keys are rejected", `{"name":"a.b","result":1,"result":2}`, "duplicate"},
		{"name is required", `{"result":1}`, "name"},
		{"error object needs a code", `{"name":"a.b","ok":false,"error":{"message":"m"}}`, "code"},
		{"error object has only code and message", `{"name":"a.b","ok":false,"error":{"code":"c","why":"m"}}`, "unknown key"},
		{"error is a string or an object", `{"name":"a.b","ok":false,"error":3}`, "string or"},
		{"ok is a boolean", `{"name":"a.b","ok":"false","error":"x"}`, "boolean"},
	}
	for _, tc := range bad {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := ParseTape([]byte("[" + tc.entry + "]"))
			if !errors.Is(err, ErrTapeInvalid) {
				t.Fatalf("err = %v, want tape_invalid", err)
			}
			if !strings.Contains(err.Error(), "entry 0") || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("message %q should name entry 0 and contain %q", err, tc.has)
			}
		})
	}
	t.Run("ok:true with a result is accepted", func(t *testing.T) {
		es := mustParseTape(t, `[{"name":"a.b","ok":true,"result":1}]`)
		if string(es[0].Result) != "1" || es[0].Error != nil {
			t.Fatalf("%+v", es[0])
		}
	})
	t.Run("result null is a result", func(t *testing.T) {
		es := mustParseTape(t, `[{"name":"a.b","result":null}]`)
		if string(es[0].Result) != "null" {
			t.Fatalf("%+v", es[0])
		}
	})
	t.Run("entries round-trip through MarshalJSON in canonical form", func(t *testing.T) {
		es := mustParseTape(t, `[{"name":"a.b","payload":{"x":1}},{"name":"c.d","args":{},"ok":false,"error":"boom!"}]`)
		b, err := json.Marshal(es)
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"name":"a.b","result":{"x":1}},{"name":"c.d","args":{},"ok":false,"error":{"code":"provider_failed","message":"boom!"}}]`
		if string(b) != want {
			t.Fatalf("got %s\nwant %s", b, want)
		}
	})
}

// TestClockExampleTapeFile checks the JIT authoring Skill's test object, kept verbatim in testdata, against
// the player alone.
func TestClockExampleTapeFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "tapes", "clock_example.json"))
	if err != nil {
		t.Fatal(err)
	}
	var test struct {
		Args     json.RawMessage `json:"args"`
		Expected json.RawMessage `json:"expected"`
		Syscalls []TapeEntry     `json:"syscalls"`
	}
	if err := json.Unmarshal(data, &test); err != nil {
		t.Fatal(err)
	}
	tape, err := NewTape(test.Syscalls)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tape.Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ ISO8601, Timezone string }
	_ = json.Unmarshal(res, &got)
	if got.ISO8601 != "2026-01-02T03:04:05+00:00" || tape.Finish() != nil {
		t.Fatalf("seed example: %s, finish %v", res, tape.Finish())
	}
}

// JIT authoring Skill: "An entry must answer what production could: its args and
// result match the route's schemas and an error uses one of the route's codes."
// Otherwise validation fails with a typed error positioned at the entry's field.
func TestTapeEntriesMatchTheirRoute(t *testing.T) {
	for _, tc := range []struct{ rule, tape, path string }{
		{"a clock.now result without unix_seconds", `[{"name":"clock.now","result":{"iso8601":"2026-01-02T03:04:05+00:00","timezone":"UTC"}}]`, "/0/result"},
		{"a clock.now result with a wrong type", `[{"name":"clock.now","result":{"iso8601":"x","unix_seconds":"1767323045","timezone":"UTC"}}]`, "/0/result"},
		{"a scalar result", `[{"name":"kv.get","result":7}]`, "/0/result"},
		{"args no call could have", `[{"name":"clock.now","args":{"tz":"UTC"},"result":{"iso8601":"x","unix_seconds":1,"timezone":"UTC"}}]`, "/0/args"},
		{"args present as null", `[{"name":"clock.now","args":null,"result":{"iso8601":"x","unix_seconds":1,"timezone":"UTC"}}]`, "/0/args"},
		{"an error code the route never fails with", `[{"name":"kv.get","args":{"key":"a"},"result":{"found":false,"value":null}},{"name":"clock.now","ok":false,"error":"host_not_allowed"}]`, "/1/error"},
		{"a made-up code", `[{"name":"kv.put","ok":false,"error":{"code":"disk_full","message":"no"}}]`, "/0/error"},
		// "A tape entry for the tools.call route may claim only an error code that
		// exists in the liberr registry."
		{"a tools.call code no layer emits", `[{"name":"tools.call","ok":false,"error":{"code":"disk_full","message":"no"}}]`, "/0/error"},
		{"a tools.call code no layer emits, as a string", `[{"name":"tools.call","ok":false,"error":"made_up_code"}]`, "/0/error"},
	} {
		_, err := NewTape(mustParseTape(t, tc.tape))
		var se *Error
		if !errors.As(err, &se) || se.Code != CodeTapeInvalid || len(se.Details) != 1 || se.Details[0].Path != tc.path {
			t.Errorf("%s: %v (%+v), want tape_invalid at %s", tc.rule, err, se, tc.path)
		}
	}
	// What production can answer is accepted: real codes, and any registered code for
	// tools.call, which passes on the code of the tool it called.
	for _, tape := range []string{
		`[{"name":"clock.now","ok":false,"error":"capability_denied"}]`,
		`[{"name":"kv.get","ok":false,"error":"store offline"}]`,
		`[{"name":"tools.call","ok":false,"error":{"code":"schema_invalid","message":"no"}}]`,
		`[{"name":"tools.call","ok":false,"error":"limit_exceeded"}]`,
		`[{"name":"no.such.route","result":1}]`,
	} {
		if _, err := NewTape(mustParseTape(t, tape)); err != nil {
			t.Errorf("%s: %v", tape, err)
		}
	}
}

// "No recovery of codes from text": a tape's error carries its layer as a field, and
// the guest reads the same "layer: message" it read live. A tape without the field
// (written by hand, or exported before it existed, its message holding the whole
// text) rejects with its message as it is: the same bytes, and no layer read out of
// them.
func TestTapeErrorLayerIsAField(t *testing.T) {
	const msg = "kv.put requires capability kv:write, which this process does not hold"
	live := errorf(CodeCapabilityDenied, msg, nil)
	for _, c := range []struct {
		rule, entry, layer, message string
	}{
		{"an exported entry names its layer", `{"code":"capability_denied","layer":"syscalls","message":"` + msg + `"}`, Layer, msg},
		{"an entry from before the layer field keeps its whole text", `{"code":"capability_denied","message":"syscalls: ` + msg + `"}`, "", "syscalls: " + msg},
	} {
		t.Run(c.rule, func(t *testing.T) {
			tape, err := NewTape(mustParseTape(t, `[{"name":"kv.put","args":{"key":"k","value":1},"ok":false,"error":`+c.entry+`}]`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = tape.Syscall(context.Background(), "kv.put", json.RawMessage(`{"key":"k","value":1}`))
			var se *Error
			if !errors.As(err, &se) || se.Code != CodeCapabilityDenied || se.Layer != c.layer || se.Message != c.message {
				t.Fatalf("replayed %#v, want layer %q message %q", err, c.layer, c.message)
			}
			if se.Error() != live.Error() {
				t.Fatalf("the guest reads %q, it read %q live", se.Error(), live.Error())
			}
		})
	}
	t.Run("the layer round-trips", func(t *testing.T) {
		es := mustParseTape(t, `[{"name":"kv.put","ok":false,"error":{"code":"capability_denied","layer":"syscalls","message":"m"}}]`)
		b, _ := json.Marshal(es)
		if want := `[{"name":"kv.put","ok":false,"error":{"code":"capability_denied","layer":"syscalls","message":"m"}}]`; string(b) != want {
			t.Fatalf("got %s, want %s", b, want)
		}
	})
	for _, bad := range []string{`"layer":3`, `"layer":""`, `"layer":"Syscalls: x"`} {
		if _, err := ParseTape([]byte(`[{"name":"kv.put","ok":false,"error":{"code":"capability_denied",` + bad + `}}]`)); !errors.Is(err, ErrTapeInvalid) {
			t.Errorf("error with %s: %v, want tape_invalid", bad, err)
		}
	}
}

// The tape player parses each document once: the tape's text once (every entry is
// built from that one decoding, NewTape parses nothing again), and each call's
// arguments once (the comparison with the entry and the route's schema read the same
// decoding). Counted by jsonexact.Decodes.
func TestTapePlayerParsesOnce(t *testing.T) {
	const tapeText = `[{"name":"clock.now","args":{"timezone":"UTC"},"result":{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}},
		{"name":"kv.get","args":{"key":"k"},"result":{"found":false,"value":null}},
		{"name":"kv.put","args":{"key":"k","value":1},"ok":false,"error":{"code":"capability_denied","layer":"syscalls","message":"m"}}]`
	before := jsonexact.Decodes()
	es, err := ParseTape([]byte(tapeText))
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonexact.Decodes() - before; n != 1 {
		t.Fatalf("ParseTape parsed %d documents, want 1", n)
	}
	before = jsonexact.Decodes()
	tape, err := NewTape(es)
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonexact.Decodes() - before; n != 0 {
		t.Fatalf("NewTape parsed %d documents of entries already parsed, want 0", n)
	}
	for _, c := range []struct{ name, args string }{{"clock.now", `{"timezone":"UTC"}`}, {"kv.get", `{"key":"k"}`}, {"kv.put", `{"key":"k","value":1}`}} {
		before = jsonexact.Decodes()
		_, _ = tape.Syscall(context.Background(), c.name, json.RawMessage(c.args))
		if n := jsonexact.Decodes() - before; n != 1 {
			t.Fatalf("%s parsed %d documents, want 1", c.name, n)
		}
	}
	if err := tape.Finish(); err != nil {
		t.Fatal(err)
	}
}

// "Parse a call's arguments once and hand the parsed value down": a tape handed the
// sandbox's exact decoding (wasm.ExactSyscaller) parses nothing, and answers as
// Syscall does for the same text.
func TestTapeSyscallExactParsesNothing(t *testing.T) {
	const tapeText = `[{"name":"kv.get","args":{"key":"k"},"result":{"found":false,"value":null}},
		{"name":"kv.get","args":{"key":"k"},"result":{"found":false,"value":null}}]`
	es, err := ParseTape([]byte(tapeText))
	if err != nil {
		t.Fatal(err)
	}
	tape, err := NewTape(es)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"key":"k"}`)
	value, err := jsonexact.Decode(args, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := jsonexact.Decodes()
	exact, err := tape.SyscallExact(context.Background(), "kv.get", args, value)
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonexact.Decodes() - before; n != 0 {
		t.Fatalf("SyscallExact parsed %d documents, want 0", n)
	}
	plain, err := tape.Syscall(context.Background(), "kv.get", args)
	if err != nil {
		t.Fatal(err)
	}
	if string(exact) != string(plain) {
		t.Fatalf("SyscallExact answered %s, Syscall %s", exact, plain)
	}
	if err := tape.Finish(); err != nil {
		t.Fatal(err)
	}
}
