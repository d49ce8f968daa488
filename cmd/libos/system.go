package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// system is an open store with a kernel on it: what every command that touches
// processes needs. Close it once.
type system struct {
	dir     string
	st      *store.Store
	k       *engine.Kernel
	sandbox *wasm.Engine
	jit     *tools.JIT
}

// access says whether a command runs tool calls (and so needs the JIT tools of
// restored processes installed again) or only reads the store.
type access int

const (
	readOnly access = iota
	readWrite
)

// dataDir is --data, or the store's default directory.
func (e *env) dataDirectory() (string, error) {
	if e.dataDir != "" {
		return e.dataDir, nil
	}
	dir, err := store.DefaultDir()
	if err != nil {
		return "", usageErr("no default store directory (%v); pass --data DIR", err)
	}
	return dir, nil
}

// open opens the store at --data (or the default directory) and starts a kernel on it,
// which restores every process the store holds.
func (e *env) open(ctx context.Context, mode access) (*system, error) {
	dir, err := e.dataDirectory()
	if err != nil {
		return nil, err
	}
	return openSystem(ctx, dir, e, mode)
}

// newSandbox starts the QuickJS sandbox with wazero's compilation cache in the user's
// cache directory, so that every command after the first starts in milliseconds.
func newSandbox(ctx context.Context, e *env) (*wasm.Engine, error) {
	cfg := wasm.Config{}
	if dir, err := os.UserCacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(dir, "libos", "wazero")
	}
	sb, err := wasm.NewEngine(ctx, cfg)
	if err != nil && cfg.CacheDir != "" {
		e.log.Warn("the compilation cache is unusable; compiling in memory", "dir", cfg.CacheDir, "err", err)
		sb, err = wasm.NewEngine(ctx, wasm.Config{})
	}
	if err != nil {
		return nil, usageErr("cannot start the sandbox: %v", err)
	}
	return sb, nil
}

// openSystem opens the store in dir and the kernel on it with every built-in tool.
// The kernel restores the store's processes; in readWrite mode their registered JIT
// tools are installed again too (recorded as jit_rehydrated events), so that calls
// can reach them.
func openSystem(ctx context.Context, dir string, e *env, mode access) (*system, error) {
	sb, err := newSandbox(ctx, e)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		sb.Close(ctx)
		if errors.Is(err, store.ErrInUse) {
			return nil, usageErr("the store %s is in use by another libos (a running 'libos serve'?): stop it, or pass --data DIR for another store", dir)
		}
		return nil, usageErr("cannot open the store %s: %v", dir, err)
	}
	jit, err := tools.NewJIT(tools.Config{Store: st, Sandbox: sb})
	if err != nil {
		st.Close()
		sb.Close(ctx)
		return nil, usageErr("cannot set up JIT tools: %v", err)
	}
	k, err := engine.Open(ctx, st, engine.Config{Builtins: append([]engine.Tool{tools.Echo()}, jit.Tools()...)})
	if err != nil {
		st.Close()
		sb.Close(ctx)
		return nil, usageErr("cannot start the kernel on %s: %v", dir, err)
	}
	sys := &system{dir: dir, st: st, k: k, sandbox: sb, jit: jit}
	for _, u := range k.UnknownSettlements() {
		e.log.Warn("a tool call was not settled before the last stop; its effects are unknown and it was not retried",
			"pid", u.PID, "call_id", u.CallID, "tool", u.Tool, "seq", u.Seq)
	}
	if mode == readWrite {
		if err := jit.Attach(ctx, k); err != nil {
			// The bindings that could be installed are; the others are named here.
			e.log.Warn("some registered JIT tools could not be installed again", "err", err)
		}
	}
	return sys, nil
}

// Close stops the kernel (waiting for calls in flight to settle), then the store and
// the sandbox.
func (s *system) Close() error {
	kerr := s.k.Close()
	serr := s.st.Close()
	s.sandbox.Close(context.Background())
	if err := errors.Join(kerr, serr); err != nil {
		return fmt.Errorf("closing %s: %w", s.dir, err)
	}
	return nil
}

// defaultProcess is the process 'libos serve', 'diagnose' and 'demo' spawn when no
// image is given: echo and the JIT lifecycle tools, with the clock and kv
// capabilities and tools.call.
func defaultProcess(p engine.Projection) engine.ProcessConfig {
	return engine.ProcessConfig{
		Capabilities: []string{"clock:now", "kv:read", "kv:write", "tools:call"},
		Projection:   p,
		Tools:        []string{tools.EchoName, tools.ProposeName, tools.ValidateName, tools.RegisterName},
	}
}

func parseProjection(s string) (engine.Projection, error) {
	switch engine.Projection(s) {
	case engine.Direct, engine.Multiplexed:
		return engine.Projection(s), nil
	}
	return "", usageErr("--projection %q: want direct or multiplexed", s)
}
