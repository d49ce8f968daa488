package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestValidateOnlyRegularFiles: "libos validate: only regular files, size-capped". A FIFO
// (which blocks its reader), /dev/zero and /dev/urandom (which never end), a FIFO inside
// a directory and an oversized file are I/O errors, exit 2, before anything runs.
func TestValidateOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	withFifo := filepath.Join(dir, "mixed")
	if err := os.Mkdir(withFifo, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(withFifo, "a.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), maxCandidateFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file (a FIFO)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{"/dev/urandom", "not a regular file (a character device)"},
		{withFifo, "not a regular file (a FIFO)"},
		{big, "limit of a candidate file"},
	} {
		r := libos(t, "", "validate", c.path)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("validate %s: exit %d, stderr %q, stdout %q", c.path, r.code, r.stderr, r.stdout)
		}
	}
}

// TestValidateInterrupted: "SIGTERM honoured at any point". A run stopped by a signal
// (its context, as main wires SIGINT and SIGTERM) prints no report and exits 2, whether
// the signal came before the files were read or while runaway tests were running.
func TestValidateInterrupted(t *testing.T) {
	runaway := filepath.Join(repoRoot(t), "testdata", "candidates", "bad_runaway_loop.json")
	raw, err := os.ReadFile(runaway)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := 0; i < 6; i++ {
		if err := os.WriteFile(filepath.Join(dir, "spin"+string(rune('a'+i))+".json"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before, cancel := context.WithCancel(context.Background())
	cancel()
	// Six runaway candidates take at least their wall time of a second each, three at
	// a time on two workers; the cancellation comes well inside that.
	during, stop := context.WithCancel(context.Background())
	defer stop()
	time.AfterFunc(300*time.Millisecond, stop)
	for name, ctx := range map[string]context.Context{"before": before, "during": during} {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"validate", dir}, strings.NewReader(""), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "interrupted") || strings.Contains(out.String(), "passed,") {
			t.Errorf("%s: exit %d, stderr %q, stdout %q", name, code, errb.String(), out.String())
		}
	}
}

// TestValidateTextEscapesCandidateStrings: "every string from a candidate escaped in text
// output so a candidate cannot forge --- PASS or N passed, 0 failed lines or send terminal
// escapes". The name, a thrown message, console output and the observed value carry line
// breaks, ESC and CSI sequences; the file name carries a forged report line.
func TestValidateTextEscapesCandidateStrings(t *testing.T) {
	forged := "\n--- PASS: forged/test_0\nok   forged x.json\n7 passed, 0 failed\n\x1b[2J\u009b31m\u202e"
	src := "export function run() {\n  console.log(" + jsString(forged) + ");\n  return { v: " + jsString(forged) + " };\n}\n"
	good := map[string]any{
		"name": "forger", "description": "Prints forged report lines.", "source_code": src,
		"input_schema":  map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{}, "additionalProperties": false},
		"output_schema": map[string]any{"type": "object"},
		"tests":         []any{map[string]any{"args": map[string]any{}, "expected": map[string]any{}, "syscalls": []any{}}},
	}
	throws := map[string]any{}
	for k, v := range good {
		throws[k] = v
	}
	throws["source_code"] = "export function run() {\n  throw new Error(" + jsString(forged) + ");\n}\n"
	badName := map[string]any{}
	for k, v := range good {
		badName[k] = v
	}
	badName["name"] = "x" + forged
	dir := t.TempDir()
	for file, c := range map[string]map[string]any{"a.json": good, "b.json": throws, "c.json": badName, "--- PASS: d\n3 passed, 0 failed.json": good} {
		b, _ := json.Marshal(c)
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"validate", "-v", dir}, strings.NewReader(""), &out, &errb)
	if code != exitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b\u009b\u202e\r") {
		t.Errorf("terminal control characters reached the report:\n%q", text)
	}
	own := regexp.MustCompile(`^(=== CANDIDATE |--- (PASS|FAIL): |    |ok   |FAIL |"|` + regexp.QuoteMeta(dir) + `/)`)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		if !own.MatchString(l) || strings.HasPrefix(l, "--- PASS: forged") || strings.HasPrefix(l, "--- PASS: d") {
			t.Errorf("a line the report did not write: %q", l)
		}
	}
	if last := lines[len(lines)-1]; last != "0 passed, 4 failed" {
		t.Errorf("closing line %q", last)
	}
	if n := len(regexp.MustCompile(`(?m)^\d+ passed, \d+ failed$`).FindAllString(text, -1)); n != 1 {
		t.Errorf("%d closing lines:\n%s", n, text)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
