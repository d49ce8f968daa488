package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// candidateFiles are the candidates testdata/candidate_verdicts.json names, relative
// to the repository root (the binary runs there, so reports name files as a user
// would).
func candidateFiles(t *testing.T) ([]string, map[string]verdict) {
	t.Helper()
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "testdata", "candidate_verdicts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var verdicts map[string]verdict
	if err := json.Unmarshal(b, &verdicts); err != nil {
		t.Fatal(err)
	}
	var files []string
	for name := range verdicts {
		files = append(files, filepath.Join("testdata", "candidates", name))
	}
	sort.Strings(files)
	return files, verdicts
}

type verdict struct {
	OK   bool   `json:"ok"`
	Code string `json:"code"`
	Rule string `json:"rule"`
}

// libosIn runs the binary in dir.
func libosIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return libosAt(t, dir, "", args...)
}

type jsonReport struct {
	Candidates []struct {
		File   string `json:"file"`
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
		} `json:"errors"`
		Warnings []json.RawMessage `json:"warnings"`
		Tests    []struct {
			Index int             `json:"index"`
			OK    bool            `json:"ok"`
			Error json.RawMessage `json:"error"`
		} `json:"tests"`
	} `json:"candidates"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// TestValidateCandidates: "runs propose-time checks + validation exactly as
// validate_jit_tool does" — every candidate of testdata/candidates gets the verdict
// and the code testdata/candidate_verdicts.json records, in the JSON, text and JUnit outputs, and the
// output is "identical on every run".
func TestValidateCandidates(t *testing.T) {
	root := repoRoot(t)
	files, verdicts := candidateFiles(t)
	junit := filepath.Join(t.TempDir(), "report.xml")

	jsonRun := libosIn(t, root, append([]string{"validate", "--json", "--junit", junit}, files...)...)
	if jsonRun.code != 1 {
		t.Fatalf("exit %d, want 1 (some candidates are rejected)\n%s", jsonRun.code, jsonRun.stderr)
	}
	var rep jsonReport
	if err := json.Unmarshal([]byte(jsonRun.stdout), &rep); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, jsonRun.stdout)
	}
	if len(rep.Candidates) != len(files) {
		t.Fatalf("%d candidates reported for %d files", len(rep.Candidates), len(files))
	}
	wantPassed := 0
	for i, c := range rep.Candidates {
		v := verdicts[filepath.Base(files[i])]
		if v.OK {
			wantPassed++
		}
		t.Run(filepath.Base(files[i]), func(t *testing.T) {
			if c.File != files[i] {
				t.Errorf("file = %q, want %q (arguments order)", c.File, files[i])
			}
			if c.OK != v.OK {
				t.Fatalf("%s: ok = %v, want %v (%s); errors %+v", c.File, c.OK, v.OK, v.Rule, c.Errors)
			}
			if !v.OK {
				// The recorded code is the first error's, in every output.
				if len(c.Errors) == 0 || c.Errors[0].Code != v.Code {
					t.Errorf("%s: the first error's code is not %s (%s); errors %+v", c.File, v.Code, v.Rule, c.Errors)
				}
			}
			for _, tr := range c.Tests {
				if tr.OK != (string(tr.Error) == "null") {
					t.Errorf("test %d: ok %v with error %s", tr.Index, tr.OK, tr.Error)
				}
			}
		})
	}
	if rep.Passed != wantPassed || rep.Failed != len(files)-wantPassed {
		t.Errorf("passed %d failed %d, want %d and %d", rep.Passed, rep.Failed, wantPassed, len(files)-wantPassed)
	}

	// Text report: one line per test, file:line:column diagnostics, closing line.
	text := libosIn(t, root, append([]string{"validate"}, files...)...)
	if text.code != 1 {
		t.Fatalf("text run exit %d\n%s", text.code, text.stderr)
	}
	closing := fmt.Sprintf("%d passed, %d failed\n", wantPassed, len(files)-wantPassed)
	if !strings.HasSuffix(text.stdout, closing) {
		t.Errorf("the report does not end with %q:\n%s", closing, tail(text.stdout))
	}
	// Positions are in the candidate's source_code, and say so: "file.json:2:19" would
	// send the reader to line 2 of the JSON file, which is something else.
	m := regexp.MustCompile(`(?m)^testdata/candidates/bad_syntax\.json: source_code:(\d+):(\d+): error: syntax_error: `).FindStringSubmatch(text.stdout)
	if m == nil {
		t.Errorf("no \"file: source_code:line:column\" diagnostic for bad_syntax.json:\n%s", text.stdout)
	} else {
		// The JSON report carries the same position as numbers.
		for _, c := range rep.Candidates {
			if c.Name == "bad_syntax" && (len(c.Errors) == 0 || fmt.Sprint(c.Errors[0].Line) != m[1] || fmt.Sprint(c.Errors[0].Column) != m[2]) {
				t.Errorf("text position %s:%s, JSON errors %+v", m[1], m[2], c.Errors)
			}
		}
	}
	if bare := regexp.MustCompile(`(?m)\.json:\d+:\d+`).FindString(text.stdout); bare != "" {
		t.Errorf("a position printed as a place in the JSON file: %q", bare)
	}
	if !strings.Contains(text.stdout, "--- PASS: clock_now/test_0\n") || !strings.Contains(text.stdout, "--- FAIL: clock_leftover/test_0\n") {
		t.Errorf("no per-test lines:\n%s", text.stdout)
	}

	// JUnit XML: well-formed, one suite per candidate, failures where rejected.
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(b, &ju); err != nil {
		t.Fatalf("JUnit XML does not parse: %v", err)
	}
	if !regexp.MustCompile(`testdata/candidates/bad_syntax\.json: source_code:\d+:\d+: error: syntax_error: `).Match(b) {
		t.Errorf("the JUnit report has no \"file: source_code:line:column\" diagnostic for bad_syntax.json")
	}
	if bare := regexp.MustCompile(`\.json:\d+:\d+`).Find(b); bare != nil {
		t.Errorf("the JUnit report prints a position as a place in the JSON file: %q", bare)
	}
	if len(ju.Suites) != len(files) {
		t.Fatalf("%d suites, want %d", len(ju.Suites), len(files))
	}
	for i, s := range ju.Suites {
		if rejected := s.Failures > 0; rejected == verdicts[filepath.Base(files[i])].OK {
			t.Errorf("suite %s: %d failures, verdict ok=%v", s.Name, s.Failures, verdicts[filepath.Base(files[i])].OK)
		}
	}

	// Deterministic: a second run prints the same bytes and writes the same XML.
	junit2 := filepath.Join(t.TempDir(), "report.xml")
	again := libosIn(t, root, append([]string{"validate", "--json", "--junit", junit2}, files...)...)
	if again.stdout != jsonRun.stdout {
		t.Errorf("--json output differs between two runs:\n%s", firstDiff(jsonRun.stdout, again.stdout))
	}
	b2, _ := os.ReadFile(junit2)
	if string(b2) != string(b) {
		t.Errorf("JUnit output differs between two runs")
	}
	if text2 := libosIn(t, root, append([]string{"validate"}, files...)...); text2.stdout != text.stdout {
		t.Errorf("text output differs between two runs:\n%s", firstDiff(text.stdout, text2.stdout))
	}

	// "a directory means every *.json in it": the directory holds the candidates and
	// nothing else, so validating it reports exactly what the file list reports, with
	// no spurious failure from a file that is not a candidate.
	dirRun := libosIn(t, root, "validate", "--json", filepath.Join("testdata", "candidates"))
	if dirRun.stdout != jsonRun.stdout {
		t.Errorf("validating the directory differs from validating its candidates:\n%s", firstDiff(jsonRun.stdout, dirRun.stdout))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d lines", len(al), len(bl))
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// TestValidateExitCodes: "Exit 0 when all candidates are ok, 1 when any is rejected,
// 2 on usage or I/O errors."
func TestValidateExitCodes(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	good, _ := os.ReadFile(filepath.Join(root, "testdata", "candidates", "good_clock_now.json"))
	bad, _ := os.ReadFile(filepath.Join(root, "testdata", "candidates", "bad_eval.json"))
	if err := os.WriteFile(filepath.Join(dir, "a_good.json"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a candidate"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func()
		args  []string
		code  int
		out   string
	}{
		{"a directory of good candidates is ok (only *.json counts)", nil, []string{"validate", dir}, 0, "1 passed, 0 failed\n"},
		{"one rejected candidate makes exit 1", func() { os.WriteFile(filepath.Join(dir, "b_bad.json"), bad, 0o644) }, []string{"validate", dir}, 1, "1 passed, 1 failed\n"},
		{"a malformed file is a rejected candidate", func() { os.WriteFile(filepath.Join(dir, "c_broken.json"), []byte(`{"name":`), 0o644) }, []string{"validate", dir}, 1, "1 passed, 2 failed\n"},
		{"a missing file is an I/O error", nil, []string{"validate", filepath.Join(dir, "missing.json")}, 2, ""},
		{"no argument is a usage error", nil, []string{"validate"}, 2, ""},
		{"an unknown flag is a usage error", nil, []string{"validate", "--nope", dir}, 2, ""},
		{"an unwritable --junit path is an I/O error", nil, []string{"validate", "--junit", filepath.Join(dir, "no", "such", "dir.xml"), filepath.Join(dir, "a_good.json")}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			r := libos(t, "", c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, c.code, r.stdout, r.stderr)
			}
			if c.out != "" && !strings.HasSuffix(r.stdout, c.out) {
				t.Errorf("output does not end with %q:\n%s", c.out, r.stdout)
			}
			if c.code == 2 && r.stderr == "" {
				t.Errorf("exit 2 without a message on stderr")
			}
		})
	}
}

// TestValidateStore: with --store, the candidates go through the real tools of a
// process, and the verdicts are the same.
func TestValidateStore(t *testing.T) {
	root := repoRoot(t)
	data := filepath.Join(t.TempDir(), "store")
	files := []string{"testdata/candidates/good_clock_now.json", "testdata/candidates/bad_tape_leftover.json"}
	r := libosIn(t, root, append([]string{"validate", "--json", "--store", data}, files...)...)
	if r.code != 1 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var rep struct {
		Candidates []struct {
			OK          bool   `json:"ok"`
			PID         string `json:"pid"`
			CandidateID string `json:"candidate_id"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Candidates) != 2 || !rep.Candidates[0].OK || rep.Candidates[1].OK || rep.Candidates[0].CandidateID == "" {
		t.Fatalf("report %s", r.stdout)
	}
	c := libos(t, "", "candidates", rep.Candidates[0].PID, "--data", data)
	if c.code != 0 || !strings.Contains(c.stdout, rep.Candidates[0].CandidateID) || !strings.Contains(c.stdout, "validated") || !strings.Contains(c.stdout, "rejected") {
		t.Fatalf("candidates: %d\n%s%s", c.code, c.stdout, c.stderr)
	}
}
