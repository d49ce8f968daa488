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

// sandbox is one real QuickJS-in-wasm engine shared by the package's tests.
func sandbox(t testing.TB) *wasm.Engine {
	t.Helper()
	sandboxOnce.Do(func() { sandboxEng, sandboxErr = wasm.NewEngine(context.Background(), wasm.Config{}) })
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandboxEng
}
