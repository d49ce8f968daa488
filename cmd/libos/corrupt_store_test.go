package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCorruptStoreExitsTwo: "a corrupted store ... becomes a typed store is corrupt error,
// exit code 2 and a message saying what to do, never a panic". One byte of every table is
// flipped; events --verify, events and call, which read the damaged log, each exit 2 with
// the advice, and no command, ps included (it reads only process records), shows a Go
// panic or stack trace.
func TestCorruptStoreExitsTwo(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := echoCalls(t, data, "", 40, strings.Repeat("x", 200))
	echoCalls(t, data, pid, 1, "y") // reopening flushes the replayed WAL into a table
	ssts, _ := filepath.Glob(filepath.Join(data, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table to corrupt")
	}
	if damageTables(t, ssts) == 0 {
		t.Fatal("no table to corrupt")
	}
	if r := libos(t, "", "ps", "--data", data); r.code != 0 && r.code != 2 || strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("libos ps: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"events", pid, "--verify"},
		{"events", pid},
		{"call", pid, "echo", `{"a":1}`},
	} {
		r := libos(t, "", append(args, "--data", data)...)
		if r.code != 2 || !strings.Contains(r.stderr, "restore it from a backup") ||
			strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
			t.Errorf("libos %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// TestServeStopsOnCorruption: "corruption detected anywhere (open, reads, background
// compaction) becomes a typed store is corrupt error with exit code 2 and a message that
// says what to do, never a panic". A server whose store is damaged under it stops once
// a read finds the damage (here an operator's verify through the server's socket),
// instead of going on with writes refused and compactions retrying: it exits 2 with the
// advice.
func TestServeStopsOnCorruption(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := echoCalls(t, data, "", 40, strings.Repeat("x", 200))
	echoCalls(t, data, pid, 1, "y") // reopening flushes the replayed WAL into a table
	srv := startLibos(t, nil, "--data", data, "serve", "--pid", pid)
	if _, ok := srv.stderr.waitFor(regexp.MustCompile(`serving an existing process`), 90*time.Second); !ok {
		t.Fatalf("serve did not start:\n%s", srv.stderr)
	}
	// The server's own compactions may replace a table between the listing and the
	// damage (a table gone is skipped), or after it: the damage is done again, on the
	// tables there are now, until a verify finds it.
	for try := 1; ; try++ {
		ssts, _ := filepath.Glob(filepath.Join(data, "*.sst"))
		if damageTables(t, ssts) == 0 {
			if try == 5 {
				t.Fatal("no table to corrupt")
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		v := libos(t, "", "--data", data, "events", pid, "--verify")
		if v.code != 0 {
			break
		}
		if try == 5 {
			t.Fatalf("verify of a damaged log through the server passed:\n%s", v.stdout)
		}
	}
	code := srv.wait(t)
	if code != 2 || !strings.Contains(srv.stderr.String(), "restore it from a backup") {
		t.Fatalf("serve on a store found corrupt: exit %d, want 2 with the advice\n%s", code, srv.stderr)
	}
	if s := srv.stderr.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") {
		t.Fatalf("serve panicked:\n%s", s)
	}
}

// damageTables flips one byte in every 97 of the middle of each table file, and
// returns how many it damaged: a table removed since it was listed is skipped.
func damageTables(t *testing.T, ssts []string) int {
	t.Helper()
	n := 0
	for _, f := range ssts {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := len(b) / 8; off < len(b)/2; off += 97 {
			b[off] ^= 0x5a
		}
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
