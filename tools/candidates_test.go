package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
)

const candidatesDir = "../testdata/candidates"

// verdictsFile records the expected verdict of every candidate. It sits beside the
// candidates, not among them, so that 'libos validate testdata/candidates' sees only
// candidates.
const verdictsFile = "../testdata/candidate_verdicts.json"

type verdict struct {
	OK   bool    `json:"ok"`
	Code *string `json:"code"`
	Rule string  `json:"rule"`
}

func loadVerdicts(t testing.TB) map[string]verdict {
	t.Helper()
	b, err := os.ReadFile(verdictsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vs map[string]verdict
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func loadCandidate(t testing.TB, file string) tools.Candidate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(candidatesDir, file))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tools.ParseCandidate(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

// TestCandidates runs every candidate of testdata/candidates through the validator
// (the same function validate_jit_tool and `libos validate` use) and checks its
// verdict: ok, and for a rejected candidate the code of its first error. Each case is
// named by its file and cites the rule it checks.
func TestCandidates(t *testing.T) {
	vs := loadVerdicts(t)
	files, _ := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	var names []string
	for _, f := range files {
		b := filepath.Base(f)
		names = append(names, b)
		if _, ok := vs[b]; !ok {
			t.Errorf("%s has no verdict in %s", b, verdictsFile)
		}
	}
	for name := range vs {
		if _, err := os.Stat(filepath.Join(candidatesDir, name)); err != nil {
			t.Errorf("%s names %s, which is not a candidate file: %v", verdictsFile, name, err)
		}
	}
	sort.Strings(names)
	if len(vs) < 30 {
		t.Fatalf("the table has %d candidates; it must have at least 30", len(vs))
	}
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{
		Clock: func() time.Time { return time.Unix(0, 0) },
	})
	for _, name := range names {
		want := vs[name]
		t.Run(name, func(t *testing.T) {
			t.Log("rule:", want.Rule)
			c := loadCandidate(t, name)
			r := v.Validate(context.Background(), c)
			if r.OK != want.OK {
				t.Fatalf("ok = %v, want %v (rule: %s)\nreport: %s", r.OK, want.OK, want.Rule, mustJSON(r))
			}
			if want.OK {
				for _, tr := range r.Tests {
					if !tr.OK {
						t.Fatalf("an ok report with a failed test: %s", mustJSON(r))
					}
				}
				return
			}
			if want.Code == nil {
				t.Fatal("a rejected candidate's verdict needs a code")
			}
			// The verdict is the code of the first error: the one the report leads with.
			if len(r.Errors) == 0 || r.Errors[0].Code != *want.Code {
				t.Fatalf("first error is not %q (rule: %s)\nreport: %s", *want.Code, want.Rule, mustJSON(r))
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}
