package wasm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Config.Lazy: "the guest's compile moves from NewEngine to the first call that needs an
// instance": a lazy Engine has compiled nothing when NewEngine returns, and its first
// call compiles the guest and runs as an eager Engine's does.
func TestLazyEngineCompilesAtFirstUse(t *testing.T) {
	e := newHostTestEngine(t, Config{Lazy: true, PoolSize: 1})
	if e.compiled != nil {
		t.Fatal("a lazy Engine compiled the guest in NewEngine")
	}
	checkHealthy(t, e)
	if e.compiled == nil {
		t.Fatal("the first call of a lazy Engine ran without the compiled guest")
	}
	checkHealthy(t, e)
}

// "... which then reports its errors": a guest that does not compile fails NewEngine,
// and with Lazy every call instead, with the same error each time.
func TestLazyEngineReportsTheCompileErrorAtEveryCall(t *testing.T) {
	bad := []byte("\x00asm\x01\x00\x00\x00\x01\xff") // a type section that ends at once
	ctx := context.Background()
	if e, err := NewEngine(ctx, Config{guest: bad}); err == nil {
		e.Close(ctx)
		t.Fatal("NewEngine compiled a broken guest")
	}
	e, err := NewEngine(ctx, Config{guest: bad, Lazy: true})
	if err != nil {
		t.Fatalf("a lazy NewEngine compiled the guest: %v", err)
	}
	defer e.Close(ctx)
	var first error
	for i := 0; i < 2; i++ {
		_, err := e.Run(ctx, sumProgram, json.RawMessage(sumArgs), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), "compile guest") {
			t.Fatalf("call %d on a broken lazy guest: %v, want the compile error", i, err)
		}
		if first == nil {
			first = err
		} else if err.Error() != first.Error() {
			t.Errorf("the second call's error %q differs from the first's %q", err, first)
		}
	}
	if err := e.Prepare(ctx); err == nil || err.Error() != first.Error() {
		t.Errorf("Prepare on a broken lazy guest: %v, want %v", err, first)
	}
}
