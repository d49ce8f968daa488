package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test whose program runs QuickJS's substring search with a long needle: C code that
// never reaches the interpreter's polls.
const neverPollingCandidate = `{"name":"needle","description":"Searches for a long needle.",` +
	`"source_code":"export function run() {\n  return { found: 'a'.repeat(1e7).includes('a'.repeat(1e5) + 'b') };\n}\n",` +
	`"input_schema":{"type":"object","properties":{},"required":[],"additionalProperties":false},` +
	`"output_schema":{"type":"object","properties":{"found":{"type":"boolean"}},"required":["found"],"additionalProperties":false},` +
	`"tests":[{"args":{},"expected":{"found":false},"syscalls":[]}]}`

// "libos validate on such a candidate ran over 20 minutes ignoring its limits and SIGTERM";
// "The host's poll is a Go call, so ... SIGTERM is honoured." SIGTERM arrives while the
// guest is in a loop that never polls: the process ends without running the test to its
// budget. The generous wait only keeps a regression from hanging the suite.
func TestValidateHonoursSIGTERMInANeverPollingLoop(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "needle.json")
	if err := os.WriteFile(file, []byte(neverPollingCandidate), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(libosBin, "validate", file)
	cmd.Env = testEnv(t)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the guest start its search
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("libos validate ignored SIGTERM; output so far:\n%s", out.String())
	}
	if strings.Contains(out.String(), "fuel: the call used its budget") || strings.Contains(out.String(), "1 passed") {
		t.Fatalf("the test ran to its end instead of stopping at the signal:\n%s", out.String())
	}
}
