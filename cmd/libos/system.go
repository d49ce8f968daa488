package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	los "github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/wasm"
)

// system is the libOS opened on the store of a command (System in package libos), with the
// kernel under its own name for the commands that hand it on. Close it once.
type system struct {
	*los.System
	k   *engine.Kernel
	dir string
}

// access says whether a command runs tool calls (and so needs the JIT tools of
// restored processes installed again) or only reads the store: installing them again
// is recorded in the event log, and a command that only reads writes nothing.
type access int

const (
	// readOnly opens the store read-only: the command writes nothing into it.
	readOnly access = iota
	// readTools is readOnly with the JIT tools of restored processes installed, in
	// memory only (a read-only store records no rehydration), for 'libos tools PID'.
	readTools
	// restore installs the JIT tools of restored processes again, as readWrite does, for
	// a command that changes the store but runs no tool (the operator's commands, and
	// 'libos tools' and 'libos diagnose' on a scratch store): like readOnly, it never
	// needs the sandbox's guest.
	restore
	readWrite
)

// dataDir is --data, or the store's default directory.
func (e *env) dataDirectory() (string, error) {
	if e.dataDir != "" {
		return e.dataDir, nil
	}
	dir, err := los.DefaultDir()
	if err != nil {
		return "", usageErr("no default store directory (%v); pass --data DIR", err)
	}
	return dir, nil
}

// open opens the store at --data (or the default directory) and starts the libOS on
// it, which restores every process the store holds.
func (e *env) open(ctx context.Context, mode access) (*system, error) {
	dir, err := e.dataDirectory()
	if err != nil {
		return nil, err
	}
	return openSystem(ctx, dir, e, mode)
}

// cacheDir is --cache-dir, else the user's cache directory: wazero's compilation cache
// of the guest, so that every command after the first starts without compiling it.
// "" (no cache directory known) compiles in memory.
func (e *env) cacheDirectory() string {
	if e.cacheDir != "" {
		return e.cacheDir
	}
	dir, err := los.DefaultCacheDir()
	if err != nil {
		return ""
	}
	return dir
}

// cacheUnusable is the OnCacheUnusable of every sandbox a command starts (a System's,
// the validator's, replay's): a command must not fail for want of a cache, so the
// sandbox compiles in memory and this says so. The sandbox calls it from its compile,
// once, so a command that compiles nothing (ps, events, ...) never says it.
func (e *env) cacheUnusable(err error) {
	e.log.Warn("the compilation cache is unusable; compiling in memory", "err", err)
}

// prestartedSandbox is the debug line of a command whose sandbox package prestart
// started while the program initialised.
const prestartedSandbox = "the sandbox was started while the program initialised"

// newSandbox starts a sandbox of its own, with the compilation cache, for the commands
// that replay journaled calls against a store without a kernel (tape.go).
func newSandbox(ctx context.Context, e *env) (*wasm.Engine, error) {
	sb, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: e.cacheDirectory(), OnCacheUnusable: e.cacheUnusable})
	if err != nil {
		return nil, usageErr("cannot start the sandbox: %v", err)
	}
	if sb.Prestarted() {
		e.log.Debug(prestartedSandbox)
	}
	return sb, nil
}

// openSystem opens the libOS on the store in dir. The kernel restores the store's
// processes; in readWrite and restore modes their registered JIT tools are installed
// again too (recorded as tools_changed events with change "rehydrated"), so that calls
// can reach them. In readOnly and readTools modes the store is opened read-only
// (los.Options.ReadOnly): nothing in dir is written, created or removed, Pebble's own
// files included, so the command works on a read-only file system or a backup and
// leaves it byte for byte as it was; a missing dir is an empty store and is not
// created. Only readWrite compiles the sandbox's guest at once.
func openSystem(ctx context.Context, dir string, e *env, mode access) (*system, error) {
	// Only readWrite runs tools; otherwise the sandbox's guest is compiled (read from
	// the cache) only if a call does need it after all, and the cache directory is not
	// touched before.
	ls, err := los.Open(ctx, dir, los.Options{CacheDir: e.cacheDirectory(), OnCacheUnusable: e.cacheUnusable,
		SkipJITRestore: mode == readOnly, LazySandbox: mode != readWrite,
		ReadOnly: mode == readOnly || mode == readTools, Cluster: e.cluster})
	if err != nil {
		if errors.Is(err, los.ErrStoreInUse) {
			return nil, usageErr("the store %s is in use by another libos (a running 'libos serve'?): stop it, or pass --data DIR for another store", dir)
		}
		return nil, usageErr("%v", err)
	}
	sys := &system{System: ls, k: ls.Kernel, dir: dir}
	if ls.SandboxPrestarted() {
		e.log.Debug(prestartedSandbox)
	}
	for _, u := range ls.UnknownSettlements() {
		e.log.Warn("a tool call was not settled before the last stop; its effects are unknown and it was not retried",
			"pid", u.PID, "call_id", u.CallID, "tool", u.Tool, "seq", u.Seq)
	}
	for _, f := range ls.BindingFailures() {
		e.log.Warn("a registered JIT tool could not be installed again", "failure", fmt.Sprintf("%+v", f))
	}
	if err := ls.RehydrateErr(); err != nil {
		// The bindings that could be installed are; the others are named here.
		e.log.Warn("some registered JIT tools could not be installed again", "err", err)
	}
	return sys, nil
}

// Close stops the kernel (waiting for calls in flight to settle), then the store and
// the sandbox.
func (s *system) Close() error { return s.System.Close() }

// image is the image to spawn: the file at path, or the embedded default image. A
// non-empty projection overrides the image's.
func loadImage(path string, projection engine.Projection) (*image.Image, error) {
	var img *image.Image
	var err error
	if path == "" {
		img, err = los.DefaultImage()
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
