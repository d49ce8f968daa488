package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
)

// reshape writes the same JSON value with other white space (indented with tabs), so that
// only a key by canonical text finds it in a memo.
func reshape(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if len(raw) == 0 {
		return raw
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "\t"); err != nil {
		return raw // not JSON: the proposal check reports it either way
	}
	return out.Bytes()
}

// Rule (the convention for validation speed-ups): a cached transform and a
// compiled-schema cache by canonical text give the same output, "checked by the existing
// corpora". Every candidate of testdata/candidates is validated with the memos empty,
// again with them full, and again with its schemas written differently; the three reports
// are identical byte for byte.
func TestMemoizedValidationIsTheSame(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no candidates: %v", err)
	}
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: func() time.Time { return tools.ValidationTime }})
	ctx := context.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tools.ParseCandidate(data)
		if err != nil {
			continue // a file the validator never sees as a candidate
		}
		tools.ForgetMemos()
		fresh, _ := json.Marshal(v.Validate(ctx, c))
		again, _ := json.Marshal(v.Validate(ctx, c))
		c2 := c
		c2.InputSchema, c2.OutputSchema = reshape(t, c.InputSchema), reshape(t, c.OutputSchema)
		reshaped, _ := json.Marshal(v.Validate(ctx, c2))
		if !bytes.Equal(fresh, again) || !bytes.Equal(fresh, reshaped) {
			t.Errorf("%s: reports differ\nfresh:    %s\nmemo:     %s\nreshaped: %s", filepath.Base(f), fresh, again, reshaped)
		}
	}
}

// A memo keyed by canonical text must not confuse two different schemas: the same
// candidate with maxItems lowered below a test's array gets the schema warning, right
// after the original filled the memo.
func TestMemoTellsSchemasApart(t *testing.T) {
	c := loadCandidate(t, "good_sum_exact.json")
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{})
	ctx := context.Background()
	argsWarning := func(r tools.Report) bool {
		for _, w := range r.Warnings {
			if w.Code == tools.WarnArgsSchema {
				return true
			}
		}
		return false
	}
	if argsWarning(v.Validate(ctx, c)) {
		t.Fatalf("the original candidate already has a %s warning", tools.WarnArgsSchema)
	}
	c.InputSchema = json.RawMessage(bytes.Replace(c.InputSchema, []byte(`"maxItems":1000`), []byte(`"maxItems":2`), 1))
	if !bytes.Contains(c.InputSchema, []byte(`"maxItems":2`)) {
		t.Fatalf("the candidate's schema changed shape: %s", c.InputSchema)
	}
	if r := v.Validate(ctx, c); !argsWarning(r) {
		t.Fatalf("lowered maxItems gives no %s warning: %+v", tools.WarnArgsSchema, r.Warnings)
	}
}

// Rule (the convention for validation speed-ups: the same output, "checked by the
// existing corpora"): Precheck only does ahead of time what Validate would compute, so
// every candidate of testdata/candidates gets, after a Precheck into empty memos, the
// report byte for byte that it gets with the memos empty; and a candidate that passes
// the proposal checks leaves its compiled source where Validate looks for it.
func TestPrecheckChangesNoReport(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no candidates: %v", err)
	}
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: func() time.Time { return tools.ValidationTime }})
	ctx := context.Background()
	prechecked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tools.ParseCandidate(data)
		if err != nil {
			continue // a file the validator never sees as a candidate
		}
		tools.ForgetMemos()
		fresh, _ := json.Marshal(v.Validate(ctx, c))
		tools.ForgetMemos()
		tools.Precheck(c, tools.Limits{})
		if tools.CheckProposal(c, tools.Limits{}) == nil {
			if !tools.SourceMemoized(c, tools.Limits{}) {
				t.Errorf("%s: Precheck left no compiled source for Validate", filepath.Base(f))
			}
			prechecked++
		}
		after, _ := json.Marshal(v.Validate(ctx, c))
		if !bytes.Equal(fresh, after) {
			t.Errorf("%s: reports differ\nfresh:          %s\nafter Precheck: %s", filepath.Base(f), fresh, after)
		}
	}
	if prechecked == 0 {
		t.Fatal("no candidate passed the proposal checks: the test compared nothing")
	}
}
