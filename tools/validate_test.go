package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

func fixedValidator(t testing.TB) *tools.Validator {
	return tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: func() time.Time { return time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC) }})
}

func codes(ds []tools.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Code)
	}
	return out
}

// TestValidateDeterministic: "deterministic seed per test" and a caller-
// supplied clock for validated_at make a report byte-identical run after run.
func TestValidateDeterministic(t *testing.T) {
	v := fixedValidator(t)
	c := loadCandidate(t, "bad_ambient_clock.json")
	c.SourceCode = `export function run() {
  return { then: new Date(1767323045000).toISOString(), r: [Math.random(), Math.random()] };
}`
	c.Tests = json.RawMessage(`[{"args":{},"expected":{},"syscalls":[]},{"args":{},"expected":{},"syscalls":[]}]`)
	a, _ := json.Marshal(v.Validate(context.Background(), c))
	b, _ := json.Marshal(v.Validate(context.Background(), c))
	if string(a) != string(b) {
		t.Fatalf("two validations differ:\n%s\n%s", a, b)
	}
	var r tools.Report
	json.Unmarshal(a, &r)
	if r.ValidatedAt != time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC) {
		t.Fatalf("validated_at comes from the caller's clock: %v", r.ValidatedAt)
	}
	if string(r.Tests[0].Observed) != string(r.Tests[1].Observed) || !strings.Contains(string(r.Tests[0].Observed), "2026-01-02T03:04:05.000Z") {
		t.Fatalf("every test sees the same seed: %s / %s", r.Tests[0].Observed, r.Tests[1].Observed)
	}
}

// TestFreshContextPerTest: state a program keeps at top level does not survive from
// one test to the next.
func TestFreshContextPerTest(t *testing.T) {
	c := loadCandidate(t, "bad_ambient_clock.json")
	c.SourceCode = "let calls = 0;\nexport function run() {\n  calls++;\n  return { calls };\n}\n"
	c.Tests = json.RawMessage(strings.Repeat(`{"args":{},"expected":{"calls":1},"syscalls":[]},`, 3))
	c.Tests = json.RawMessage("[" + strings.TrimSuffix(string(c.Tests), ",") + "]")
	if r := fixedValidator(t).Validate(context.Background(), c); !r.OK {
		t.Fatalf("%s", mustJSON(r))
	}
}

// TestValidateDiagnostics: every message is specific — test index, tape entry index,
// JSON path of the first difference, line and column.
func TestValidateDiagnostics(t *testing.T) {
	v := fixedValidator(t)
	cases := []struct {
		file  string
		code  string
		test  int
		entry int // -1: none
		path  string
		has   string
	}{
		{"bad_tape_args.json", "tape_mismatch", 0, 0, "", "tape entry 0"},
		{"bad_tape_name.json", "tape_mismatch", 0, 0, "", "expected clock.today"},
		{"bad_tape_leftover.json", "tape_leftover", 0, 1, "", "entry 1"},
		{"bad_tape_extra_call.json", "tape_mismatch", 0, 0, "", "no entry left"},
		{"bad_caught_mismatch.json", "tape_mismatch", 0, 0, "", "expected kv.get"},
		{"bad_wrong_expected.json", "expected_mismatch", 1, -1, "$.n", "$.n"},
		{"bad_returns_date.json", "not_json", 0, -1, "$.when", ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			r := v.Validate(context.Background(), loadCandidate(t, tc.file))
			d := r.Errors[0]
			if d.Code != tc.code || d.Test == nil || *d.Test != tc.test || d.Path != tc.path || !strings.Contains(d.Message, tc.has) ||
				!strings.HasPrefix(d.Message, fmt.Sprintf("test %d: ", tc.test)) {
				t.Fatalf("diagnostic %s", mustJSON(d))
			}
			if (tc.entry < 0) != (d.Entry == nil) || (d.Entry != nil && *d.Entry != tc.entry) {
				t.Fatalf("tape entry index: %s", mustJSON(d))
			}
		})
	}
	r := v.Validate(context.Background(), loadCandidate(t, "bad_syntax.json"))
	if r.Errors[0].Line != 2 || r.Errors[0].Column != 10 || len(r.Tests) != 0 {
		t.Fatalf("a syntax error has a position and no test runs: %s", mustJSON(r))
	}
}

// TestValidateWarnings: the portability lint and the args/expected-vs-schema checks
// are warnings, never errors ("tests themselves do not exercise schemas").
func TestValidateWarnings(t *testing.T) {
	c := loadCandidate(t, "good_sum_exact.json")
	c.InputSchema = json.RawMessage(`{"type":"object","properties":{"values":{"type":"array","items":{"type":"integer"}},"label":{"type":"string"},"opts":{"type":"object"},"any":{}}}`)
	c.OutputSchema = json.RawMessage(`{"type":"object","properties":{"total":{"type":"string","maxLength":5},"max":{"type":["number","null"]}},"required":["total","max"],"additionalProperties":false}`)
	r := fixedValidator(t).Validate(context.Background(), c)
	if !r.OK {
		t.Fatalf("warnings must not reject: %s", mustJSON(r))
	}
	want := map[string]string{
		"schema_open_object":       "input_schema:",
		"schema_optional_property": `property "label" is not in "required"`,
		"schema_unbounded_string":  "input_schema/properties/label",
		"schema_unbounded_array":   "input_schema/properties/values",
		"schema_untyped":           "input_schema/properties/any",
		"test_expected_schema":     "test 0: the output schema would reject",
	}
	for code, has := range want {
		found := false
		for _, w := range r.Warnings {
			found = found || (w.Code == code && strings.Contains(w.Message, has))
		}
		if !found {
			t.Errorf("no %s warning containing %q: %v", code, has, codes(r.Warnings))
		}
	}

	c = loadCandidate(t, "good_clock_now.json")
	c.Tests = json.RawMessage(`[{"args":{"timezone":7},"expected":{"iso8601":"x","timezone":"UTC"},"syscalls":[{"name":"clock.now","result":{"iso8601":"x","unix_seconds":1,"timezone":"UTC"}}]}]`)
	c.SourceCode = strings.Replace(c.SourceCode, "{timezone: args.timezone}", `{timezone: "UTC"}`, 1)
	r = fixedValidator(t).Validate(context.Background(), c)
	if !r.OK || len(r.Warnings) != 1 || r.Warnings[0].Code != tools.WarnArgsSchema || *r.Warnings[0].Test != 0 {
		t.Fatalf("args the input schema would reject: %s", mustJSON(r))
	}
	c = loadCandidate(t, "good_empty_tests.json")
	r = fixedValidator(t).Validate(context.Background(), c)
	if !r.OK || !strings.Contains(strings.Join(codes(r.Warnings), ","), tools.WarnNoTests) {
		t.Fatalf("empty tests prove only the compile path: %s", mustJSON(r))
	}
}

// TestReportBounded: errors, logs and observed values are bounded, and a cut list says
// so.
func TestReportBounded(t *testing.T) {
	c := loadCandidate(t, "bad_ambient_clock.json")
	c.SourceCode = `export function run() {
  for (let i = 0; i < 200; i++) console.log("line " + i + " " + "x".repeat(2000));
  return { big: "y".repeat(10000) };
}`
	c.Tests = json.RawMessage("[" + strings.TrimSuffix(strings.Repeat(`{"args":{},"expected":{},"syscalls":[]},`, tools.DefaultMaxTests), ",") + "]")
	r := fixedValidator(t).Validate(context.Background(), c)
	if len(r.Errors) != tools.MaxReportErrors || r.Errors[len(r.Errors)-1].Code != tools.CodeTruncated {
		t.Fatalf("%d errors, last %v", len(r.Errors), r.Errors[len(r.Errors)-1])
	}
	if len(r.Logs) != tools.MaxReportLogs || len(r.Logs[0].Message) > 520 {
		t.Fatalf("%d logs, first %d bytes", len(r.Logs), len(r.Logs[0].Message))
	}
	if len(r.Tests) != tools.DefaultMaxTests || len(r.Tests[0].Observed) > tools.MaxObservedBytes {
		t.Fatalf("%d tests, observed %d bytes", len(r.Tests), len(r.Tests[0].Observed))
	}
	b, _ := json.Marshal(r)
	if len(b) > 128<<10 {
		t.Fatalf("the report is %d bytes", len(b))
	}
}

// TestValidationWallTime: a validation as a whole is bounded in time, not only each
// test: what did not finish fails with limit_exceeded. The tests run without a fuel
// budget (Fuel < 0), so that on a fast machine the first does not end by its fuel
// before the validation's wall time passes.
func TestValidationWallTime(t *testing.T) {
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{WallTime: 300 * time.Millisecond, Run: wasm.Limits{WallTime: 5 * time.Second, Fuel: -1}})
	c := loadCandidate(t, "bad_runaway_loop.json")
	c.Tests = json.RawMessage(`[{"args":{},"expected":{},"syscalls":[]},{"args":{},"expected":{},"syscalls":[]}]`)
	r := v.Validate(context.Background(), c)
	if r.OK || len(r.Tests) != 2 || r.Tests[0].Error.Code != "limit_exceeded" || r.Tests[1].Error.Code != "limit_exceeded" ||
		!strings.Contains(r.Tests[1].Error.Message, "validation's wall time") {
		t.Fatalf("%s", mustJSON(r))
	}
}

// "A test that can never pass says why": a test whose expected value holds a number
// no JavaScript number equals still fails as expected_mismatch, and its message adds
// what JavaScript reads the number as, so that the program is not blamed for it.
func TestValidateExpectedNumberNoProgramReturns(t *testing.T) {
	v := fixedValidator(t)
	for _, c := range []struct{ args, expected, note string }{
		{`{"n":9007199254740991}`, `{"n":9007199254740993}`, "(no JavaScript number is 9007199254740993 (at $.n): JavaScript reads it as 9007199254740992; no program can return it)"},
		{`{"n":-0.9}`, `{"n":0.10000000000000001}`, "(no JavaScript number is 0.10000000000000001 (at $.n): JavaScript reads it as 0.1; no program can return it)"},
		{`{"n":1}`, `{"n":1e400}`, "(no JavaScript number is 1e400 (at $.n): it overflows a double, and JavaScript reads it as Infinity, which is not JSON; no program can return it)"},
		{`{"n":-1}`, `{"n":1e-400}`, "(no JavaScript number is 1e-400 (at $.n): it is below the smallest double, and JavaScript reads it as 0; no program can return it)"},
		// An ordinary mismatch has no note.
		{`{"n":2}`, `{"n":4}`, ""},
	} {
		cand := loadCandidate(t, "bad_wrong_expected.json")
		cand.Tests = json.RawMessage(`[{"args":` + c.args + `,"expected":` + c.expected + `,"syscalls":[]}]`)
		r := v.Validate(context.Background(), cand)
		if r.OK || len(r.Errors) == 0 {
			t.Fatalf("%s: the test passed: %s", c.expected, mustJSON(r))
		}
		d := r.Errors[0]
		if d.Code != tools.CodeExpectedMismatch || d.Path != "$.n" || !strings.HasPrefix(d.Message, "test 0: returned value differs from expected at $.n: expected ") {
			t.Fatalf("%s: diagnostic %s", c.expected, mustJSON(d))
		}
		if c.note == "" && strings.Contains(d.Message, "no JavaScript number") {
			t.Fatalf("%s: an ordinary mismatch has a note: %s", c.expected, d.Message)
		}
		if !strings.HasSuffix(d.Message, c.note) {
			t.Fatalf("%s: message %q does not end with %q", c.expected, d.Message, c.note)
		}
	}
}
