package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
)

// Rule (ValidatorConfig.Parallel): "The report is the same either way: tests, errors and
// logs are listed in test order." Every candidate of the table gives the same report, byte
// for byte, with its tests run one after another and four at a time.
func TestParallelTestsSameReport(t *testing.T) {
	clock := func() time.Time { return time.Unix(0, 0) }
	serial := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: clock, Parallel: 1})
	parallel := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Clock: clock, Parallel: 4})
	files, _ := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	if len(files) < 30 {
		t.Fatalf("only %d candidates", len(files))
	}
	for _, f := range files {
		c := loadCandidate(t, filepath.Base(f))
		a, _ := json.Marshal(serial.Validate(context.Background(), c))
		b, _ := json.Marshal(parallel.Validate(context.Background(), c))
		if string(a) != string(b) {
			t.Errorf("%s: one after another:\n%s\nfour at a time:\n%s", filepath.Base(f), a, b)
		}
	}
}

// Rule (JIT authoring Skill: "logs" are part of the validation result, bounded): with tests running at
// once, the console lines still come in test order, each test's in the order it wrote
// them, cut at MaxReportLogs.
func TestParallelLogsInTestOrder(t *testing.T) {
	c := loadCandidate(t, "bad_ambient_clock.json")
	c.SourceCode = `export function run(args: { n: number }) {
  for (let i = 0; i < 10; i++) console.log("test " + args.n + " line " + i);
  return {};
}`
	var tests []string
	for i := 0; i < 8; i++ {
		tests = append(tests, fmt.Sprintf(`{"args":{"n":%d},"expected":{},"syscalls":[]}`, i))
	}
	c.Tests = json.RawMessage("[" + strings.Join(tests, ",") + "]")
	r := tools.NewValidator(sandbox(t), tools.ValidatorConfig{Parallel: 4}).Validate(context.Background(), c)
	if !r.OK || len(r.Logs) != tools.MaxReportLogs {
		t.Fatalf("%s", mustJSON(r))
	}
	for k, l := range r.Logs {
		want := fmt.Sprintf("test %d line %d", k/10, k%10)
		if l.Test != k/10 || l.Message != want {
			t.Fatalf("log %d is %+v, want test %d %q", k, l, k/10, want)
		}
	}
}
