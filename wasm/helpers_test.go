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

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
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

func wantError(t *testing.T, err error, code, limit string) *Fault {
	t.Helper()
	var we *Fault
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

// bareHost runs the guest under a host module of the test's own, whose now_ms answers
// nowMs and whose other imports do nothing: what the guest does with values the Engine's
// host never sends.
type bareHost struct {
	nowMs float64
	// polls counts the poll calls; from the stopAt-th on (when not 0) poll says stop.
	polls, stopAt int
	mod           api.Module
}

func newBareHost(t *testing.T) *bareHost {
	t.Helper()
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(hostTestCacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	t.Cleanup(func() { rt.Close(ctx); cache.Close(ctx) })
	h := &bareHost{}
	b := rt.NewHostModuleBuilder("libos")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {
		st[0] = api.EncodeF64(h.nowMs)
	}), nil, []api.ValueType{api.ValueTypeF64}).Export("now_ms")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {
		h.polls++
		st[0] = 0
		if h.stopAt > 0 && h.polls >= h.stopAt {
			st[0] = 1
		}
	}), nil, []api.ValueType{api.ValueTypeI32}).Export("poll")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) { st[0] = interruptNow }),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export("syscall")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {}),
		[]api.ValueType{api.ValueTypeI32}, nil).Export("syscall_take")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {}),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export("log")
	// Fuel without end: these tests are about what the guest does, not about its budget.
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) { st[0] = fuelIdle }),
		[]api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).Export("fuel")
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	h.mod, err = rt.InstantiateWithConfig(ctx, guestWasm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs program with {} as its arguments and returns the status and the output text.
func (h *bareHost) run(t *testing.T, program string) (int32, string) {
	t.Helper()
	return h.runFlags(t, program, 0)
}

// runFlags is run with libos_run's flags.
func (h *bareHost) runFlags(t *testing.T, program string, flags uint64) (int32, string) {
	t.Helper()
	ctx, mod := context.Background(), h.mod
	src, args := h.write(t, program), h.write(t, "{}")
	defer mod.ExportedFunction("libos_free").Call(ctx, src)
	defer mod.ExportedFunction("libos_free").Call(ctx, args)
	r, err := mod.ExportedFunction("libos_run").Call(ctx, src, uint64(len(program)), args, 2, 32<<20, 0, 1, flags)
	if err != nil {
		t.Fatalf("libos_run trapped: %v", err)
	}
	return int32(r[0]), h.output(t)
}

// write copies s into memory the guest allocated for it.
func (h *bareHost) write(t *testing.T, s string) uint64 {
	t.Helper()
	r, err := h.mod.ExportedFunction("libos_alloc").Call(context.Background(), uint64(len(s)))
	if err != nil || r[0] == 0 {
		t.Fatal("libos_alloc", err)
	}
	h.mod.Memory().Write(uint32(r[0]), []byte(s))
	return r[0]
}

// output is the guest's output buffer.
func (h *bareHost) output(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	p, _ := h.mod.ExportedFunction("libos_out_ptr").Call(ctx)
	n, _ := h.mod.ExportedFunction("libos_out_len").Call(ctx)
	out, _ := h.mod.Memory().Read(uint32(p[0]), uint32(n[0]))
	return string(out)
}
