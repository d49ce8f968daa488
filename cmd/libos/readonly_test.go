package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A command that runs no tool opens the libOS with a lazy sandbox (LazySandbox): the
// read-only ones (ps, events, candidates, ...), and those that install the restored JIT
// tools but run none (the operator's commands, 'libos tools PID', and on a scratch store
// 'libos tools' and 'libos diagnose' without --jit). None of them reads or
// compiles the guest, so with an empty --cache-dir they leave the cache without a
// compiled guest in it, where compiling it would have written wazero's entry.
func TestCommandsThatRunNoToolDoNotCompileTheSandbox(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	// A store with a process, made by the demo with the shared cache.
	r := libos(t, "", "demo", "--keep")
	m := regexp.MustCompile(`the store stays in ([^\s)]+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatal(r.stdout)
	}
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	if err := os.Rename(m[1], data); err != nil {
		t.Fatal(err)
	}
	pid := regexp.MustCompile(`pid (pid_[0-9a-f]{32})`).FindStringSubmatch(r.stdout)[1]

	cache := t.TempDir()
	for _, args := range [][]string{
		{"ps"},          // read-only
		{"events", pid}, // read-only
		{"tools", pid},  // installs the restored JIT tools to list them
		{"pause", pid},  // an operator's change
		{"resume", pid}, // and back
		{"tools"},       // a fresh process in a scratch store
		{"diagnose"},    // the echo diagnostic, in a scratch store
	} {
		args = append(args, "--data", data, "--cache-dir", cache)
		if r := libos(t, "", args...); r.code != 0 {
			t.Fatalf("libos %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	var files []string
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("a command that runs no tool wrote into the compilation cache: %v", files)
	}
}
