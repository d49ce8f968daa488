package wasm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// Prestart makes the engine NewEngine(cfg) would make, and with prepare its first
// instance too (Prepare: for a program that runs a call at once; a server that waits for
// its first call keeps its idle memory smaller without), on a goroutine of its own, for
// a program that knows which engine it will ask for before it is ready to ask: the libos command knows it from its arguments
// while its packages are still initialising, and the guest's load then overlaps that
// initialisation on another core instead of following it.
//
// The first NewEngine after Prestart looks at what it made, and no other does. When its
// Config matches (the same CacheDir, MaxMemory and Lazy; the PoolSize is the caller's),
// it takes that engine instead of making one, waiting for it if need be. When it does
// not match, or the prestarted engine failed to start, it makes its own engine, as
// without Prestart, and reports whatever error that meets; the prestarted engine is
// closed. An engine nobody takes lives until the process ends. Prestart works once per
// process; later calls do nothing.
//
// The prestarted engine's compile is the one that looks at the cache directory, so a
// program that takes it probes the directory once. When the directory is unusable, the
// prestarted engine compiles in memory and the report belongs to its taker: a
// NewEngine with Config.OnCacheUnusable takes the engine and its OnCacheUnusable is
// called once with the error; one without it does not take the engine (it wants the
// error as its own) and makes its own, as without Prestart. cfg's own OnCacheUnusable
// is never called: the taker's is.
func Prestart(cfg Config, prepare bool) { pre.start(cfg, prepare) }

// pre is the process's Prestart, which NewEngine looks at.
var pre = new(prestarter)

// prestarter is what Prestart started: its Config; done, closed once e is set (nil when
// the start failed); and whether a NewEngine has looked. e is read only after done is
// closed, by the one that looked.
type prestarter struct {
	mu      sync.Mutex
	cfg     Config
	done    chan struct{}
	claimed bool
	e       *Engine
}

func (p *prestarter) start(cfg Config, prepare bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		return
	}
	done := make(chan struct{})
	p.cfg, p.done = cfg, done
	go func() {
		defer close(done)
		ctx := context.Background()
		cfg.prestarting = true
		// An unusable cache directory is reported to the taker (take), from the error
		// the engine keeps.
		cfg.OnCacheUnusable = func(error) {}
		e, err := NewEngine(ctx, cfg)
		if err != nil {
			return
		}
		if prepare {
			if err := e.Prepare(ctx); err != nil {
				e.Close(ctx)
				return
			}
		}
		p.e = e
	}()
}

// take is NewEngine's look at what Prestart made: the engine, with the caller's pool
// size and OnCacheUnusable, when it serves cfg and started; else nil, and the caller
// makes its own (a prestarted engine that does not serve it is closed once ready). An
// engine that compiled in memory for want of a usable cache directory serves only a
// caller with OnCacheUnusable, which is given the error here.
func (p *prestarter) take(cfg Config) *Engine {
	p.mu.Lock()
	if p.done == nil || p.claimed {
		p.mu.Unlock()
		return nil
	}
	p.claimed = true
	done, made := p.done, p.cfg
	p.mu.Unlock()
	if made.CacheDir != cfg.CacheDir || made.MaxMemory != cfg.MaxMemory || made.Lazy != cfg.Lazy || cfg.guest != nil {
		go func() {
			<-done
			if p.e != nil {
				p.e.Close(context.Background())
			}
		}()
		return nil
	}
	<-done
	e := p.e
	if e == nil {
		return nil
	}
	if e.cacheErr != nil && cfg.OnCacheUnusable == nil {
		e.Close(context.Background())
		return nil
	}
	e.onCacheUnusable = cfg.OnCacheUnusable
	e.setPoolSize(cfg.PoolSize)
	e.prestarted = true
	if e.cacheErr != nil {
		cfg.OnCacheUnusable(e.cacheErr)
	}
	return e
}

// Prestarted reports whether NewEngine took e from Prestart rather than making it.
func (e *Engine) Prestarted() bool { return e.prestarted }

// poolSizeFor is the number of idle instances an engine keeps for Config.PoolSize n.
func poolSizeFor(n int) int {
	if n == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return max(n, 0)
}

// setPoolSize makes the engine keep the idle instances Config.PoolSize n says from now
// on, closing the idle ones beyond them.
func (e *Engine) setPoolSize(n int) {
	size := poolSizeFor(n)
	e.mu.Lock()
	e.poolSize = size
	var extra []*instance
	if len(e.idle) > size {
		extra = append(extra, e.idle[size:]...)
		clear(e.idle[size:])
		e.idle = e.idle[:size]
	}
	e.mu.Unlock()
	for _, in := range extra {
		in.close(context.Background())
	}
}

// DefaultCacheDir is the compilation cache directory of a program that names none:
// libos/wazero in the user's cache directory (os.UserCacheDir).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "libos", "wazero"), nil
}

// CheckCacheDir makes dir if missing and proves a file can be written in it: wazero
// writes the cache after compiling, and fails the compile when it cannot (a directory
// that could be read but not written would fail every compile the cache lacks). The
// compile of an engine with a cache directory calls it (Config.CacheDir).
func CheckCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
