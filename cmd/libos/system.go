package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
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
// tools are installed again too (recorded as tools_changed events with change
// "rehydrated"), so that calls can reach them.
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
	cfg := engine.Config{Builtins: append([]engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}, jit.Tools()...)}
	if mode == readWrite {
		// The kernel rebuilds the committed JIT bindings of the processes it restores.
		cfg.JIT = jit
	}
	k, err := engine.Open(ctx, st, cfg)
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
	for _, f := range k.BindingFailures() {
		e.log.Warn("a registered JIT tool could not be installed again", "failure", fmt.Sprintf("%+v", f))
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

// image is the image to spawn: the file at path, or the embedded default image. A
// non-empty projection overrides the image's.
func loadImage(path string, projection engine.Projection) (*image.Image, error) {
	var img *image.Image
	var err error
	if path == "" {
		img, err = tools.DefaultImage()
	} else {
		abs, aerr := filepath.Abs(path)
		if aerr != nil {
			return nil, usageErr("--image: %v", aerr)
		}
		img, err = image.LoadImage(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	}
	if err != nil {
		return nil, usageErr("%s", describe(err))
	}
	if projection != "" {
		img.Projection = projection
	}
	return img, nil
}

// spawnImage spawns a process of the image at path (the default image when empty).
func (s *system) spawnImage(ctx context.Context, path string, projection engine.Projection) (string, error) {
	img, err := loadImage(path, projection)
	if err != nil {
		return "", err
	}
	pid, err := s.k.SpawnImage(ctx, img)
	if err != nil {
		return "", usageErr("spawn: %s", describe(err))
	}
	return pid, nil
}

// describe is an engine error with every detail it lists, one per line.
func describe(err error) string {
	var ee *engine.Error
	if !errors.As(err, &ee) || len(ee.Details) == 0 {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(err.Error())
	for _, d := range ee.Details {
		fmt.Fprintf(&b, "\n  %s: %s", orRoot(d.Path), d.Message)
	}
	return b.String()
}

// parseProjection reads --projection; "" means the image's.
func parseProjection(s string) (engine.Projection, error) {
	switch engine.Projection(s) {
	case "":
		return "", nil
	case engine.Direct, engine.Multiplexed:
		return engine.Projection(s), nil
	}
	return "", usageErr("--projection %q: want direct or multiplexed", s)
}
