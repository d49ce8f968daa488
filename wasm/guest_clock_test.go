package wasm

import (
	"context"
	"math"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// bareHost runs the guest under a host module of the test's own, whose now_ms answers
// nowMs and whose other imports do nothing: what the guest does with values the Engine's
// host never sends.
type bareHost struct {
	nowMs float64
	mod   api.Module
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
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) { st[0] = 0 }),
		nil, []api.ValueType{api.ValueTypeI32}).Export("poll")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) { st[0] = interruptNow }),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export("syscall")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {}),
		[]api.ValueType{api.ValueTypeI32}, nil).Export("syscall_take")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, st []uint64) {}),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export("log")
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
	ctx, mod := context.Background(), h.mod
	write := func(s string) uint64 {
		r, err := mod.ExportedFunction("libos_alloc").Call(ctx, uint64(len(s)))
		if err != nil || r[0] == 0 {
			t.Fatal("libos_alloc", err)
		}
		mod.Memory().Write(uint32(r[0]), []byte(s))
		return r[0]
	}
	src, args := write(program), write("{}")
	defer mod.ExportedFunction("libos_free").Call(ctx, src)
	defer mod.ExportedFunction("libos_free").Call(ctx, args)
	r, err := mod.ExportedFunction("libos_run").Call(ctx, src, uint64(len(program)), args, 2, 32<<20, 0, 1)
	if err != nil {
		t.Fatalf("libos_run trapped: %v", err)
	}
	p, _ := mod.ExportedFunction("libos_out_ptr").Call(ctx)
	n, _ := mod.ExportedFunction("libos_out_len").Call(ctx)
	out, _ := mod.Memory().Read(uint32(p[0]), uint32(n[0]))
	return int32(r[0]), string(out)
}

// "Date.now() must never saturate to nonsense": the host holds its clock to the range a
// Date can hold (±8.64e15 ms), and the guest holds whatever now_ms answers to it as well,
// so a clock outside it (or NaN) gives the edge of the range (or the epoch), never a value
// no Date can hold, a wrapped integer or a trap.
func TestGuestClockRange(t *testing.T) {
	const program = `function run() { const d = new Date(); return [Date.now(), d.getTime(), d.toISOString()]; }`
	h := newBareHost(t)
	for _, tc := range []struct {
		name string
		ms   float64
		want string
	}{
		{"a clock in range is read as it is", 1767323045678, `[1767323045678,1767323045678,"2026-01-02T03:04:05.678Z"]`},
		{"the top of the Date range", 8.64e15, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"past the top is held at the top", 9.3e18, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"far past the top", 1e300, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"+Inf", math.Inf(1), `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"below the bottom is held at the bottom", -1e300, `[-8640000000000000,-8640000000000000,"-271821-04-20T00:00:00.000Z"]`},
		{"-Inf", math.Inf(-1), `[-8640000000000000,-8640000000000000,"-271821-04-20T00:00:00.000Z"]`},
		{"NaN reads as the epoch", math.NaN(), `[0,0,"1970-01-01T00:00:00.000Z"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.nowMs = tc.ms
			status, out := h.run(t, program)
			if status != 0 || out != tc.want {
				t.Errorf("now_ms %v: status %d, %s; want %s", tc.ms, status, out, tc.want)
			}
		})
	}
}
