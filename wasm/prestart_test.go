package wasm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentlibos/libos/liberr"
)

// closedEngine reports whether e was closed.
func closedEngine(e *Engine) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Prestart: "The first NewEngine after Prestart looks at what it made ... When its Config
// matches ... it takes that engine instead of making one ... the PoolSize is the
// caller's": the engine NewEngine returns is the prestarted one, already prepared (an
// idle instance waits), keeping no more idle instances than the caller's PoolSize, and
// it runs calls; the NewEngine after it makes an engine of its own. Without prepare
// ("a server that waits for its first call") it has no instance yet.
func TestNewEngineTakesThePrestartedEngine(t *testing.T) {
	saved := pre
	pre = new(prestarter)
	t.Cleanup(func() { pre = saved })
	dir := t.TempDir()
	Prestart(Config{CacheDir: dir, PoolSize: 4}, true)
	Prestart(Config{CacheDir: t.TempDir()}, false) // works once per process: ignored
	e := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
	if e != pre.e || !e.Prestarted() {
		t.Fatal("NewEngine with the prestarted Config made an engine of its own")
	}
	e.mu.Lock()
	idle, size := len(e.idle), e.poolSize
	e.mu.Unlock()
	if idle != 1 || size != 1 {
		t.Errorf("the taken engine keeps %d idle instance(s) with pool size %d, want the prepared one and the caller's 1", idle, size)
	}
	checkHealthy(t, e)
	if again := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1}); again == e || again.Prestarted() {
		t.Error("a second NewEngine got the prestarted engine too")
	}

	// Without prepare the engine is compiled and has no instance yet.
	pre = new(prestarter)
	Prestart(Config{CacheDir: dir}, false)
	e = newHostTestEngine(t, Config{CacheDir: dir})
	if !e.Prestarted() || e.compiled == nil || len(e.idle) != 0 {
		t.Errorf("prestarted without prepare: prestarted %v, compiled %v, %d idle instances; want true, true, 0", e.Prestarted(), e.compiled != nil, len(e.idle))
	}
	checkHealthy(t, e)
}

// "When it does not match ... it makes its own engine, as without Prestart ... the
// prestarted engine is closed": another cache directory, another memory cap and a lazy
// engine each get an engine of their own, and the prestarted one is closed.
func TestNewEngineWithAnotherConfigClosesThePrestartedEngine(t *testing.T) {
	saved := pre
	t.Cleanup(func() { pre = saved })
	dir := t.TempDir()
	for _, other := range []Config{
		{CacheDir: t.TempDir()},
		{CacheDir: dir, MaxMemory: 32 << 20},
		{CacheDir: dir, Lazy: true},
	} {
		pre = new(prestarter)
		Prestart(Config{CacheDir: dir}, false)
		e := newHostTestEngine(t, other)
		<-pre.done
		if pre.e == nil {
			t.Fatalf("the prestart on %s failed", dir)
		}
		if e == pre.e {
			t.Fatalf("NewEngine(%+v) took the engine prestarted for %s", other, dir)
		}
		for deadline := time.Now().Add(10 * time.Second); !closedEngine(pre.e); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the prestarted engine that NewEngine(%+v) did not take is not closed", other)
				break
			}
		}
		checkHealthy(t, e)
	}
}

// Prestart: "When the directory is unusable, the prestarted engine compiles in memory
// and the report belongs to its taker: a NewEngine with Config.OnCacheUnusable takes
// the engine and its OnCacheUnusable is called once with the error; one without it does
// not take the engine ... and makes its own, as without Prestart." On a cache directory
// under a regular file, a NewEngine without OnCacheUnusable fails as it does without
// Prestart; one with it gets the prestarted engine, one report of code cache_unusable,
// and runs calls.
func TestAPrestartOnAnUnusableCacheDirIsReportedToItsTaker(t *testing.T) {
	saved := pre
	t.Cleanup(func() { pre = saved })
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "cache")
	_, want := NewEngine(context.Background(), Config{CacheDir: bad})
	if want == nil {
		t.Fatal("NewEngine started on a cache directory under a regular file")
	}
	pre = new(prestarter)
	Prestart(Config{CacheDir: bad}, true)
	_, err := NewEngine(context.Background(), Config{CacheDir: bad})
	if err == nil || err.Error() != want.Error() {
		t.Errorf("NewEngine without OnCacheUnusable after a prestart: %v, want %v", err, want)
	}

	pre = new(prestarter)
	Prestart(Config{CacheDir: bad, OnCacheUnusable: func(error) { t.Error("the OnCacheUnusable given to Prestart was called") }}, true)
	var r reports
	e := newHostTestEngine(t, Config{CacheDir: bad, OnCacheUnusable: r.report})
	if !e.Prestarted() {
		t.Fatal("NewEngine with OnCacheUnusable did not take the engine prestarted on an unusable cache")
	}
	checkHealthy(t, e)
	if errs := r.get(); len(errs) != 1 || liberr.CodeOf(errs[0]) != liberr.CodeCacheUnusable {
		t.Errorf("the taker's reports: %v, want one of code cache_unusable", errs)
	}
}

// "the PoolSize is the caller's": setPoolSize closes the idle instances beyond it, and
// a negative size keeps none.
func TestSetPoolSizeClosesTheIdleInstancesBeyondIt(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 2})
	a, err := e.get(hostCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.get(hostCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	e.put(hostCtx(t), a)
	e.put(hostCtx(t), b)
	if n := len(e.idle); n != 2 {
		t.Fatalf("%d idle instances, want 2", n)
	}
	e.setPoolSize(1)
	if n := len(e.idle); n != 1 || e.poolSize != 1 {
		t.Errorf("after setPoolSize(1): %d idle, pool size %d", n, e.poolSize)
	}
	e.setPoolSize(-1)
	if n := len(e.idle); n != 0 || e.poolSize != 0 {
		t.Errorf("after setPoolSize(-1): %d idle, pool size %d", n, e.poolSize)
	}
	checkHealthy(t, e)
}
