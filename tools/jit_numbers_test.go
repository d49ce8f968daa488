package tools_test

import (
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// Protocol-diagnostics Skill: "Numbers keep their exact spelling (2^53+1 stays exact)."
// Nothing may be silently changed: a number in a JIT tool's arguments that a double
// cannot hold is refused before the tool runs, with a typed error naming its JSON
// Pointer and saying to send it as a string, in both projections; echo, which runs no
// JavaScript, keeps it exact.
func TestJITRefusesNumbersADoubleCannotHold(t *testing.T) {
	src := `export function run(args: { n: unknown }) { return { n: args.n }; }`
	schema := `{"type":"object","properties":{"n":{}},"required":["n"],"additionalProperties":false}`
	for _, proj := range []engine.Projection{engine.Direct, engine.Multiplexed} {
		t.Run(string(proj), func(t *testing.T) {
			w := newWorld(t)
			pid := w.spawn(t, proj)
			obj := withField(t, openCandidate(t, "same", src, `{"type":"object"}`), "input_schema", schema)
			w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, obj)))
			call := func(args string) (map[string]any, error) {
				name := "same"
				if proj == engine.Multiplexed {
					name, args = engine.RunJITTool, `{"tool_name":"same","arguments":`+args+`}`
				}
				out, err := w.call(t, pid, name, args)
				if err != nil {
					return nil, err
				}
				return map[string]any{"raw": string(out)}, nil
			}
			for _, args := range []string{`{"n":9007199254740993}`, `{"n":[1,{"x":1e400}]}`, `{"n":-9007199254740995}`} {
				_, err := call(args)
				if codeOf(err) != "number_inexact" || !strings.Contains(err.Error(), "send it as a string") || !strings.Contains(err.Error(), " at /n") {
					t.Fatalf("%s: %v; want number_inexact naming the pointer", args, err)
				}
			}
			if out, err := call(`{"n":"9007199254740993"}`); err != nil || out["raw"] != `{"n":"9007199254740993"}` {
				t.Fatalf("as a string: %v %v", out, err)
			}
			if out, err := call(`{"n":9007199254740992}`); err != nil || out["raw"] != `{"n":9007199254740992}` {
				t.Fatalf("2^53: %v %v", out, err)
			}
			if out := w.mustCall(t, pid, tools.EchoName, `{"n":9007199254740993}`); out == nil {
				t.Fatal("echo")
			}
		})
	}
}

// The same refusal holds in validation: a test whose arguments or tape result hold such
// a number fails with number_inexact at its pointer, and the schema lint warns about an
// integer property whose bounds a double cannot hold.
func TestValidationRefusesNumbersADoubleCannotHold(t *testing.T) {
	v := fixedValidator(t)
	c := loadCandidate(t, "bad_inexact_number.json")
	r := v.Validate(t.Context(), c)
	if r.OK || len(r.Errors) == 0 || r.Errors[0].Code != "number_inexact" || r.Errors[0].Path != "/n" {
		t.Fatalf("%s", mustJSON(r))
	}
	found := false
	for _, w := range r.Warnings {
		if w.Code == tools.WarnUnboundedInteger && w.Path == "input_schema/properties/n" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no %s warning: %s", tools.WarnUnboundedInteger, mustJSON(r.Warnings))
	}
	c.Tests = []byte(`[{"args":{"n":1},"expected":{"n":1},"syscalls":[{"name":"kv.get","args":{"key":"k"},"result":{"found":true,"value":12345678901234567890}}]}]`)
	c.SourceCode = `export async function run(args: { n: number }, libos: any) { try { await libos.syscall("kv.get", {key: "k"}); } catch (e) {} return { n: args.n }; }`
	r = v.Validate(t.Context(), c)
	if r.OK || len(r.Errors) == 0 || r.Errors[0].Code != "number_inexact" || r.Errors[0].Path != "/value" {
		t.Fatalf("%s", mustJSON(r))
	}
}
