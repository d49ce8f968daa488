package main

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// A read-only command (ps, events, candidates, ...) opens the store without running any
// tool (SkipJITRestore), so it opens the sandbox lazily (LazySandbox): it never reads or
// compiles the guest. With an empty --cache-dir, 'libos ps' leaves the cache without a
// compiled guest in it, where compiling it would have written wazero's entry.
func TestReadOnlyCommandsDoNotCompileTheSandbox(t *testing.T) {
	cache := t.TempDir()
	data := filepath.Join(t.TempDir(), "store")
	if r := libos(t, "", "ps", "--data", data, "--cache-dir", cache); r.code != 0 {
		t.Fatalf("libos ps: exit %d\n%s", r.code, r.stderr)
	}
	var files []string
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("libos ps wrote into the compilation cache: %v", files)
	}
}
