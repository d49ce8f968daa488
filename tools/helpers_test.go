package tools_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentlibos/libos/wasm"
)

var (
	sandboxOnce sync.Once
	sandboxEng  *wasm.Engine
	sandboxErr  error
)

// libosPoolSize is libos.DefaultPoolSize (the root package imports this one, so the
// constant cannot be imported here): the idle instances a System keeps, so that the
// concurrent JIT call benchmark measures the pool production runs with.
const libosPoolSize = 16

// sandbox is one real QuickJS-in-wasm engine shared by the package's tests.
func sandbox(t testing.TB) *wasm.Engine {
	t.Helper()
	sandboxOnce.Do(func() {
		sandboxEng, sandboxErr = wasm.NewEngine(context.Background(), wasm.Config{PoolSize: libosPoolSize})
	})
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandboxEng
}
