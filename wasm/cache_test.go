package wasm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentlibos/libos/liberr"
)

// unusableCacheDirs are cache directories no file can be written in: one under a
// regular file, which holds for every user, and, for a user that permissions hold for
// (not root), a directory without write permission.
func unusableCacheDirs(t *testing.T) map[string]string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"under a regular file": filepath.Join(file, "cache")}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o700) })
	if CheckCacheDir(ro) != nil {
		dirs["read-only"] = ro
	}
	return dirs
}

// reports counts the calls of an OnCacheUnusable and keeps their errors.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) report(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *reports) get() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Config.OnCacheUnusable: "the guest is compiled in memory, nothing is kept on disk,
// and OnCacheUnusable is called once, on the goroutine of the compile, with the error
// (code cache_unusable)", and CacheDir: "before [the compile], the directory is not
// touched". On an unusable directory an eager engine reports at NewEngine, a lazy one
// nothing until its first call, and each then runs calls, with one report in all
// however many calls run.
func TestAnUnusableCacheDirIsReportedOnceAndTheGuestCompiledInMemory(t *testing.T) {
	for name, dir := range unusableCacheDirs(t) {
		for _, lazy := range []bool{false, true} {
			var r reports
			e, err := NewEngine(context.Background(), Config{CacheDir: dir, OnCacheUnusable: r.report, Lazy: lazy, PoolSize: 1})
			if err != nil {
				t.Fatalf("%s, lazy %v: NewEngine = %v, want the guest compiled in memory", name, lazy, err)
			}
			t.Cleanup(func() { e.Close(context.Background()) })
			if n := len(r.get()); lazy && n != 0 {
				t.Errorf("%s: a lazy engine reported %d time(s) before compiling", name, n)
			} else if !lazy && n != 1 {
				t.Errorf("%s: NewEngine reported %d time(s), want 1", name, n)
			}
			checkHealthy(t, e)
			checkHealthy(t, e)
			errs := r.get()
			if len(errs) != 1 {
				t.Fatalf("%s, lazy %v: %d reports after two calls, want 1: %v", name, lazy, len(errs), errs)
			}
			if liberr.CodeOf(errs[0]) != liberr.CodeCacheUnusable {
				t.Errorf("%s, lazy %v: reported %v, want code cache_unusable", name, lazy, errs[0])
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%s, lazy %v: the unusable directory holds %d entries", name, lazy, len(ents))
			}
		}
	}
}

// "Nil makes that error the compile's: NewEngine's, or with Lazy every call's."
func TestWithoutOnCacheUnusableAnUnusableCacheDirFailsTheCompile(t *testing.T) {
	ctx := context.Background()
	for name, dir := range unusableCacheDirs(t) {
		if e, err := NewEngine(ctx, Config{CacheDir: dir}); liberr.CodeOf(err) != liberr.CodeCacheUnusable {
			if e != nil {
				e.Close(ctx)
			}
			t.Errorf("%s: NewEngine = %v, want code cache_unusable", name, err)
		}
		e, err := NewEngine(ctx, Config{CacheDir: dir, Lazy: true})
		if err != nil {
			t.Fatalf("%s: a lazy NewEngine looked at the cache directory: %v", name, err)
		}
		for i := 0; i < 2; i++ {
			if _, err := e.Run(ctx, sumProgram, json.RawMessage(sumArgs), nil, Options{}); liberr.CodeOf(err) != liberr.CodeCacheUnusable {
				t.Errorf("%s: call %d of a lazy engine = %v, want code cache_unusable", name, i, err)
			}
		}
		if err := e.Close(ctx); err != nil {
			t.Errorf("%s: Close of a lazy engine that never compiled: %v", name, err)
		}
	}
}
