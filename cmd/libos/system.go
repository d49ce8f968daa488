package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// system is an open store with a kernel on it: what every command that touches
// processes needs. Close it once.
type system struct {
	dir string
	st  *store.Store
	k   *engine.Kernel
}

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
func (e *env) open(ctx context.Context) (*system, error) {
	dir, err := e.dataDirectory()
	if err != nil {
		return nil, err
	}
	return openSystem(ctx, dir, e)
}

func openSystem(ctx context.Context, dir string, e *env) (*system, error) {
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return nil, usageErr("the store %s is in use by another libos (a running 'libos serve'?): stop it, or pass --data DIR for another store", dir)
		}
		return nil, usageErr("cannot open the store %s: %v", dir, err)
	}
	k, err := engine.Open(ctx, st, kernelConfig())
	if err != nil {
		st.Close()
		return nil, usageErr("cannot start the kernel on %s: %v", dir, err)
	}
	for _, u := range k.UnknownSettlements() {
		e.log.Warn("a tool call was not settled before the last stop; its effects are unknown and it was not retried",
			"pid", u.PID, "call_id", u.CallID, "tool", u.Tool, "seq", u.Seq)
	}
	return &system{dir: dir, st: st, k: k}, nil
}

// kernelConfig lists the built-in tools a process may enable.
func kernelConfig() engine.Config {
	return engine.Config{Builtins: []engine.Tool{tools.Echo()}}
}

// Close stops the kernel (waiting for calls in flight to settle) and then the store.
func (s *system) Close() error {
	kerr := s.k.Close()
	serr := s.st.Close()
	if err := errors.Join(kerr, serr); err != nil {
		return fmt.Errorf("closing %s: %w", s.dir, err)
	}
	return nil
}

// defaultProcess is the process 'libos serve', 'diagnose' and 'demo' spawn when no
// image is given: echo, the clock and kv capabilities and tools.call.
func defaultProcess(p engine.Projection) engine.ProcessConfig {
	return engine.ProcessConfig{
		Capabilities: []string{"clock:now", "kv:read", "kv:write", "tools:call"},
		Projection:   p,
		Tools:        []string{tools.EchoName},
	}
}

func parseProjection(s string) (engine.Projection, error) {
	switch engine.Projection(s) {
	case engine.Direct, engine.Multiplexed:
		return engine.Projection(s), nil
	}
	return "", usageErr("--projection %q: want direct or multiplexed", s)
}
