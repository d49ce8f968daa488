package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The compiled guest is shared through an on-disk cache (one fixed directory, reused by
// later test runs: a cache is keyed by the module and wazero's version) so that tests
// needing their own Engine do not each pay the cold compile.
var (
	hostCacheOnce sync.Once
	hostCacheDir  string

	hostEngineOnce sync.Once
	hostEngine     *Engine
	hostEngineErr  error
)

func hostTestCacheDir(t testing.TB) string {
	hostCacheOnce.Do(func() {
		hostCacheDir = filepath.Join(os.TempDir(), "libos-wasm-test-cache")
	})
	return hostCacheDir
}

// hostTestEngine returns the Engine shared by tests that do not care about its Config.
func hostTestEngine(t testing.TB) *Engine {
	t.Helper()
	dir := hostTestCacheDir(t)
	hostEngineOnce.Do(func() {
		hostEngine, hostEngineErr = NewEngine(context.Background(), Config{CacheDir: dir})
	})
	if hostEngineErr != nil {
		t.Fatal(hostEngineErr)
	}
	return hostEngine
}

// newHostTestEngine makes a private Engine, closed when the test ends.
func newHostTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = hostTestCacheDir(t)
	}
	e, err := NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// hostCtx bounds a test so that a runaway the host failed to stop cannot hang CI; it is
// far above every wall time the tests set.
func hostCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustRun(t *testing.T, e *Engine, program string, args string, sys Syscaller, opts Options) *Result {
	t.Helper()
	res, err := e.Run(hostCtx(t), program, json.RawMessage(args), sys, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func wantError(t *testing.T, err error, code, limit string) *Error {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v (%T), want *wasm.Error %s/%s", err, err, code, limit)
	}
	if we.Code != code || we.Limit != limit {
		t.Fatalf("error = %q/%q (%v), want %q/%q", we.Code, we.Limit, we, code, limit)
	}
	return we
}

// syscallFunc adapts a function to Syscaller.
type syscallFunc func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)

func (f syscallFunc) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return f(ctx, name, args)
}

// sumProgram is the tiny run() of the benchmarks and the health check after a runaway.
const sumProgram = `function run(args) { let s = 0; for (const n of args.xs) s += n; return {sum: s}; }`

const sumArgs = `{"xs":[1,2,3,4,5,6,7,8,9,10]}`

// checkHealthy runs the tiny program: "after each, the next call on the same Engine succeeds".
func checkHealthy(t *testing.T, e *Engine) {
	t.Helper()
	res := mustRun(t, e, sumProgram, sumArgs, nil, Options{})
	if string(res.Value) != `{"sum":55}` {
		t.Fatalf("after the failure, the next call returned %s", res.Value)
	}
}
