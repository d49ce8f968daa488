package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
)

// tapeCase is one file of testdata/tapes: a program, a test in the JIT authoring
// Skill's format, and the verdict validation must reach.
type tapeCase struct {
	Rule     string          `json:"rule"`
	Program  string          `json:"program"`
	TestFile string          `json:"test_file"`
	Test     json.RawMessage `json:"test"`
	Want     struct {
		OK         bool     `json:"ok"`
		Code       string   `json:"code"`
		MessageHas []string `json:"message_has"`
	} `json:"want"`
}

// TestTapeCasesThroughTheValidator runs every case of testdata/tapes through the
// production validator (the one validate_jit_tool and `libos validate` use), so the
// tape rules are checked where they are judged: "The tape is consumed in order; args
// (optional) must equal the call's arguments as JSON values; result (or payload)
// answers, ok: false with error rejects. A wrong name or arguments rejects at the call
// and fails the test even if the program catches it; unused entries fail the test."
func TestTapeCasesThroughTheValidator(t *testing.T) {
	dir := filepath.Join("..", "testdata", "tapes")
	files, err := filepath.Glob(filepath.Join(dir, "*.case.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tape cases in %s (%v)", dir, err)
	}
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: func() time.Time { return time.Unix(0, 0) }})
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".case.json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c tapeCase
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatal(err)
			}
			test := c.Test
			if c.TestFile != "" {
				if test, err = os.ReadFile(filepath.Join(dir, c.TestFile)); err != nil {
					t.Fatal(err)
				}
			}
			cand := tools.Candidate{
				Name:         "tape_case",
				Description:  c.Rule,
				SourceCode:   "export " + c.Program,
				InputSchema:  json.RawMessage(`{"type":"object"}`),
				OutputSchema: json.RawMessage(`{}`),
				Tests:        json.RawMessage("[" + string(test) + "]"),
			}
			r := v.Validate(context.Background(), cand)
			t.Logf("rule: %s", c.Rule)
			if r.OK != c.Want.OK {
				t.Fatalf("ok = %v, want %v\nreport: %s", r.OK, c.Want.OK, mustJSON(r))
			}
			if len(r.Tests) != 1 {
				t.Fatalf("%d test results for one test\nreport: %s", len(r.Tests), mustJSON(r))
			}
			tr := r.Tests[0]
			if c.Want.OK {
				if !tr.OK {
					t.Fatalf("an ok report with a failed test: %s", mustJSON(r))
				}
				return
			}
			if tr.Error == nil || tr.Error.Code != c.Want.Code || len(r.Errors) == 0 || r.Errors[0].Code != c.Want.Code {
				t.Fatalf("the test's error is not %q\nreport: %s", c.Want.Code, mustJSON(r))
			}
			for _, sub := range c.Want.MessageHas {
				if !strings.Contains(tr.Error.Message, sub) {
					t.Errorf("message %q lacks %q", tr.Error.Message, sub)
				}
			}
		})
	}
}
