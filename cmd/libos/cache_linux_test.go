//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentlibos/libos/internal/dirwatch"
)

// cacheWarning is what a command prints when its compilation cache is unusable.
const cacheWarning = "the compilation cache is unusable"

// watchRun runs the binary with args while dirwatch records the tree at root, and
// returns what it recorded.
func watchRun(t *testing.T, root string, args ...string) (result, []dirwatch.Event) {
	t.Helper()
	w, err := dirwatch.Watch(root)
	if err != nil {
		t.Fatal(err)
	}
	r := libos(t, "", args...)
	events, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return r, events
}

// readOnlyCache runs the binary with args while dir cannot be written: a read-only bind
// mount of it in a mount namespace of the command's own when the test runs as root
// (permissions do not hold for root), else dir without write permission.
func readOnlyCache(t *testing.T, dir string, args ...string) result {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		return libos(t, "", args...)
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("no mount namespace here: %v %s", err, out)
	}
	return libosOverReadOnly(t, dir, args...)
}

// "A lazy engine creates, probes and opens wazero's compilation cache only at its
// first compile" (wasm.Config.CacheDir: "before it, the directory is not touched"):
// the commands that only read the store (ps, events, candidates, bindings, approvals,
// tools PID) compile nothing, so they create nothing where their cache directory is,
// neither the missing directory nor a probe file removed at once, and say nothing of
// it.
func TestReadOnlyCommandsCreateNothingInTheCacheDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := demoStore(t, data)
	root := t.TempDir()
	existing := filepath.Join(root, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []string{existing, filepath.Join(root, "missing", "libos")} {
		for _, args := range readOnlyCommands(pid) {
			args = append([]string{"--data", data, "--cache-dir", cache}, args...)
			r, events := watchRun(t, root, args...)
			if r.code != 0 {
				t.Fatalf("libos %v: exit %d\n%s", args, r.code, r.stderr)
			}
			if len(events) != 0 {
				t.Errorf("libos %v touched the cache directory: %v", args, events)
			}
			if strings.Contains(r.stderr, cacheWarning) {
				t.Errorf("libos %v warned of a cache it does not use:\n%s", args, r.stderr)
			}
		}
	}
}

// "libos ps and the other read-only commands neither warn nor create anything on a
// read-only or unusable cache directory": under a regular file, and a read-only one,
// each command prints what it prints with a usable cache, and no warning.
func TestReadOnlyCommandsOnAnUnusableCacheDirSayNothingOfIt(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := demoStore(t, data)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	for _, args := range readOnlyCommands(pid) {
		args = append([]string{"--data", data}, args...)
		want := libos(t, "", args...)
		if want.code != 0 {
			t.Fatalf("libos %v: exit %d\n%s", args, want.code, want.stderr)
		}
		for name, r := range map[string]result{
			"under a regular file": libos(t, "", append([]string{"--cache-dir", filepath.Join(file, "cache")}, args...)...),
			"read-only":            readOnlyCache(t, ro, append([]string{"--cache-dir", ro}, args...)...),
		} {
			if r.code != 0 || r.stdout != want.stdout {
				t.Errorf("libos %v with a cache directory %s: exit %d\n%s%s\nwant\n%s", args, name, r.code, r.stdout, r.stderr, want.stdout)
			}
			if strings.Contains(r.stderr, cacheWarning) {
				t.Errorf("libos %v with a cache directory %s warned of it:\n%s", args, name, r.stderr)
			}
		}
	}
	if ents, _ := os.ReadDir(ro); len(ents) != 0 {
		t.Errorf("the read-only cache directory holds %d entries", len(ents))
	}
}

// "A prestarted command (see cmd/libos/internal/prestart, wasm.Prestart) probes its
// cache once instead of twice": validate, which runs the validator on the prestarted
// sandbox, and serve, which opens a System on it, each create one probe file in the
// cache directory.
func TestAPrestartedCommandProbesItsCacheOnce(t *testing.T) {
	cand := filepath.Join(repoRoot(t), "testdata", "candidates", "good_sum_exact.json")
	cache := t.TempDir()
	for _, args := range [][]string{
		{"--log-level", "debug", "--cache-dir", cache, "validate", cand},
		{"--log-level", "debug", "--cache-dir", cache, "serve", "--data", filepath.Join(t.TempDir(), "store")},
	} {
		r, events := watchRun(t, cache, args...)
		if r.code != 0 || !strings.Contains(r.stderr, prestartedSandbox) {
			t.Fatalf("libos %v: exit %d, prestarted %v\n%s%s", args, r.code, strings.Contains(r.stderr, prestartedSandbox), r.stdout, r.stderr)
		}
		if n := dirwatch.CountCreated(events, ".probe-"); n != 1 {
			t.Errorf("libos %v probed its cache directory %d times, want once: %v", args, n, events)
		}
	}
}

// "libos replay uses the same probe and fallback as the other commands", and "a
// read-only cache dir gives one fallback report and a working compile": on a cache
// directory that exists but cannot be written, replay, validate and call each compile
// in memory, warn once and work.
func TestCommandsCompileInMemoryOnAReadOnlyCacheDir(t *testing.T) {
	data, pid, calls := tapeStore(t)
	cand := filepath.Join(repoRoot(t), "testdata", "candidates", "good_sum_exact.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", pid, calls[0], "--data", data}, "same"},
		{[]string{"validate", cand}, "PASS"},
		{[]string{"call", pid, "clock_visits", `{"timezone":"UTC"}`, "--data", data}, "visits"},
	} {
		ro := t.TempDir()
		r := readOnlyCache(t, ro, append([]string{"--cache-dir", ro}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("libos %v on a read-only cache directory: exit %d\n%s%s", c.args, r.code, r.stdout, r.stderr)
		}
		if n := strings.Count(r.stderr, cacheWarning); n != 1 {
			t.Errorf("libos %v on a read-only cache directory warned %d times, want once:\n%s", c.args, n, r.stderr)
		}
	}
}
