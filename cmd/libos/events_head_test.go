package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// echoCalls opens the store at dir (creating it and a process when pid is ""), makes n
// echo calls with the given marker and returns the process.
func echoCalls(t *testing.T, dir, pid string, n int, marker string) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if pid == "" {
		if pid, err = k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		if _, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo","arguments":{"m":"`+marker+`"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	return pid
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

// TestEventsExpectHead: "--verify cannot see a rolled-back suffix" without an anchor;
// "libos events PID --head prints sequence and hash to keep elsewhere; --verify
// --expect-head SEQ:HASH fails on a shorter or different log".
func TestEventsExpectHead(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "store")
	pid := echoCalls(t, data, "", 2, "a")
	old := filepath.Join(root, "old")
	copyDir(t, data, old) // the store as it was: the state a roll-back returns to
	echoCalls(t, data, pid, 2, "a")

	r := libos(t, "", "events", pid, "--head", "--data", data)
	head := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^[1-9][0-9]*:[0-9a-f]{64}$`).MatchString(head) {
		t.Fatalf("--head: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "events", pid, "--verify", "--expect-head", head, "--data", data); r.code != 0 {
		t.Fatalf("the log it came from: %d %s", r.code, r.stderr)
	}
	// A later head of the same log still contains the anchor.
	echoCalls(t, data, pid, 1, "a")
	if r := libos(t, "", "events", pid, "--verify", "--expect-head", head, "--data", data); r.code != 0 {
		t.Fatalf("a longer log: %d %s", r.code, r.stderr)
	}

	// Cut back: the older store is a shorter chain that verifies on its own ...
	if r := libos(t, "", "events", pid, "--verify", "--data", old); r.code != 0 {
		t.Fatalf("without an anchor the shorter log verifies (what the README says): %d %s", r.code, r.stderr)
	}
	// ... and fails against the exported head.
	r = libos(t, "", "events", pid, "--verify", "--expect-head", head, "--data", old)
	if r.code != 1 || !strings.Contains(r.stderr, "were removed") {
		t.Fatalf("a shorter log: %d %s", r.code, r.stderr)
	}

	// A different log of the same length: the old store continued with other calls.
	echoCalls(t, old, pid, 2, "b")
	r = libos(t, "", "events", pid, "--verify", "--expect-head", head, "--data", old)
	if r.code != 1 || !strings.Contains(r.stderr, "another log") {
		t.Fatalf("a different log: %d %s", r.code, r.stderr)
	}

	for _, bad := range []string{"12", "x:00", "3:abcd"} {
		if r := libos(t, "", "events", pid, "--verify", "--expect-head", bad, "--data", data); r.code != 2 {
			t.Errorf("--expect-head %q: exit %d, want 2", bad, r.code)
		}
	}
	if r := libos(t, "", "events", pid, "--expect-head", head, "--data", data); r.code != 2 {
		t.Errorf("--expect-head without --verify: exit %d", r.code)
	}
	_ = os.RemoveAll(old)
}
