package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/wasm/internal/fuel"
	"github.com/agentlibos/libos/wasm/internal/linmem"
	"github.com/agentlibos/libos/wasm/internal/seed"
)

// guestWasm is the QuickJS guest, built by `make guest` from wasm/guest.
//
//go:embed libos_guest.wasm
var guestWasm []byte

const (
	pageSize = 64 << 10

	// DefaultMaxMemory is the hard cap of an instance's linear memory when Config.MaxMemory is 0.
	DefaultMaxMemory = 64 << 20
	// minMaxMemory leaves room for the guest's initial memory (1 MiB stack + data) and a
	// JavaScript runtime.
	minMaxMemory = 8 << 20
	maxMaxMemory = 4 << 30
)

// Config configures an Engine. The zero value is ready to use.
type Config struct {
	// CacheDir, when not empty, holds wazero's on-disk compilation cache, so that a new
	// process compiles the guest in milliseconds instead of a third of a second, and the
	// snapshot of the guest's prepared state (snapfile.go), so that it does not build that
	// state again. The compile of the guest (in NewEngine, or with Lazy at the first
	// call) creates the directory if missing, proves a file can be written in it
	// (CheckCacheDir) and opens the cache; before it, the directory is not touched. A
	// directory that cannot be used is an error of code cache_unusable: the compile's,
	// or with OnCacheUnusable, the callback's. Empty means compile in memory every time.
	CacheDir string
	// OnCacheUnusable, when set, makes an unusable CacheDir no failure: the guest is
	// compiled in memory, nothing is kept on disk, and OnCacheUnusable is called once,
	// on the goroutine of the compile, with the error (code cache_unusable) that would
	// otherwise have failed it. Nil makes that error the compile's: NewEngine's, or with
	// Lazy every call's.
	OnCacheUnusable func(error)
	// MaxMemory is the hard cap, in bytes, of every instance's linear memory, enforced by
	// wazero's page limit: the guest cannot grow past it whatever it does. Rounded down to
	// whole 64 KiB pages. 0 means DefaultMaxMemory (64 MiB); it must be at least 8 MiB and
	// at most 4 GiB.
	MaxMemory int64
	// PoolSize is how many idle instances the engine keeps for reuse. Concurrent calls
	// beyond it still run, on instances that are closed afterwards. 0 means GOMAXPROCS;
	// a negative value keeps none (every call instantiates afresh).
	PoolSize int
	// Lazy moves the guest's compile (a read of the compilation cache, or a full compile
	// without it) from NewEngine to the first call that needs an instance (Run, RunDoc,
	// Prepare), which then reports its errors: for a program that may never run one,
	// such as an inspection of a store. The zero value compiles in NewEngine.
	Lazy bool

	// guest replaces the embedded guest: benchmarks load the build's uninstrumented
	// module to measure what the fuel costs. Only tests set it.
	guest []byte
	// prestarting marks the NewEngine that Prestart runs, which must not wait for itself.
	prestarting bool
}

// Engine runs JavaScript programs in the QuickJS guest. The guest is compiled once, when
// the Engine is made (with Config.Lazy, when the first instance is); instances are
// pooled and reused, and each call gets a JavaScript
// runtime and context that no earlier call touched: the instance's memory is restored
// to the snapshot taken once the prelude was installed. An Engine is safe for
// concurrent use.
type Engine struct {
	// rt, compiled and cache are made by start: in NewEngine, or with Config.Lazy at the
	// first use (ready); until then they are nil.
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	cache    wazero.CompilationCache

	// What start needs: the guest, the cache directory, the runtime configuration
	// without the cache (for replaceCacheEntry) and whether the embedded seed applies.
	// compileOnce and compileErr make a lazy engine's compile happen once.
	guest       []byte
	cacheDir    string
	plain       wazero.RuntimeConfig
	seeded      bool
	compileOnce sync.Once
	compileErr  error
	// onCacheUnusable is Config.OnCacheUnusable. cacheErr is the error of the cache
	// directory that start found unusable and compiled in memory without; Prestart's
	// taker is given it (prestart.go).
	onCacheUnusable func(error)
	cacheErr        error

	// guestSHA is the hex sha256 of the guest, part of the key of every compiled program.
	guestSHA string
	programs programCache

	maxMemory    int64 // hard cap, whole pages
	discardAbove uint32
	poolSize     int

	mu       sync.Mutex
	idle     []*instance
	closed   bool
	inflight sync.WaitGroup
	// restoring counts the instances being restored in the background (release), and
	// restored (on mu) is broadcast when one is done: get waits for one of them rather
	// than instantiating a new instance, which costs many restores.
	restoring int
	restored  sync.Cond

	// snap is the guest's memory from snapFrom on, taken once right after libos_prepare
	// built the JavaScript state every call starts from; every instance is made from it
	// and restored to it after every call. Set once, under snapMu.
	snapMu   sync.Mutex
	snap     []byte
	snapFrom uint32
	// snapRuns are the runs of 4 KiB blocks of snap that are not all zero: all that a new
	// instance, whose memory is zero, needs written (336 of its 384 KiB).
	snapRuns [][2]int
	// snapDir is the cache directory where the snapshot is kept between processes
	// (snapfile.go) under snapKey; empty without a cache directory. snapLoaded records
	// that snap was read from there rather than prepared here.
	snapDir    string
	snapKey    snapKey
	snapLoaded bool

	// prestarted is set when NewEngine took the engine from Prestart (prestart.go).
	prestarted bool
}

// NewEngine compiles the guest (with Config.Lazy, the first call does) and prepares the
// host imports. It does not instantiate anything yet: the first Run does.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	maxMem := cfg.MaxMemory
	if maxMem == 0 {
		maxMem = DefaultMaxMemory
	}
	if maxMem < minMaxMemory || maxMem > maxMaxMemory {
		return nil, fmt.Errorf("wasm: Config.MaxMemory %d out of range [%d, %d]", cfg.MaxMemory, minMaxMemory, int64(maxMaxMemory))
	}
	if !cfg.prestarting {
		if e := pre.take(cfg); e != nil {
			return e, nil
		}
	}
	pages := uint32(maxMem / pageSize)
	poolSize := poolSizeFor(cfg.PoolSize)

	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(pages).
		// Termination comes from the guest polling the host (see poll), which costs almost
		// nothing; wazero's own context checks slow all guest code several times over.
		WithCloseOnContextDone(false).
		// Trap messages are enough; DWARF would only make traps slower to build.
		WithDebugInfoEnabled(false)
	e := &Engine{maxMemory: int64(pages) * pageSize, poolSize: poolSize}
	e.restored.L = &e.mu
	// Wasm memory never shrinks: an instance whose memory grew past a quarter of the cap
	// is closed after its call rather than kept, so one big call does not pin memory in
	// every pooled instance.
	e.discardAbove = uint32(e.maxMemory / 4)
	guest, guestSHA := guestWasm, guestDigest(guestWasm, builtGuest)
	if cfg.guest != nil {
		sum := sha256.Sum256(cfg.guest)
		guest, guestSHA = cfg.guest, hex.EncodeToString(sum[:])
	}
	e.guest, e.guestSHA, e.cacheDir, e.plain = guest, guestSHA, cfg.CacheDir, rc
	e.onCacheUnusable = cfg.OnCacheUnusable
	if cfg.CacheDir != "" {
		e.seeded = cfg.guest == nil && guestSHA == builtGuest.SHA256
		if k, ok := guestKey(e.guestSHA, e.maxMemory); ok {
			e.snapDir, e.snapKey = cfg.CacheDir, k
		}
	}
	if !cfg.Lazy {
		if err := e.start(ctx); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// start makes what running the guest needs: it opens the compilation cache (openCache),
// makes the runtime with the host module and compiles the guest. A cache directory
// that cannot be used fails it, unless the engine has an onCacheUnusable to report it
// to: then the engine forgets the directory (no cache, no snapshot file, no seed) and
// compiles in memory. On failure nothing is left open.
func (e *Engine) start(ctx context.Context) error {
	rc := e.plain
	if e.cacheDir != "" {
		cache, err := openCache(e.cacheDir)
		switch {
		case err == nil:
			e.cache = cache
			rc = rc.WithCompilationCache(cache)
		case e.onCacheUnusable == nil:
			return err
		default:
			e.cacheErr = err
			e.cacheDir, e.snapDir, e.seeded = "", "", false
			e.onCacheUnusable(err)
		}
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	err := instantiateHost(ctx, e.rt)
	if err != nil {
		err = fmt.Errorf("wasm: host module: %w", err)
	} else {
		err = e.compile(ctx)
	}
	if err != nil {
		e.rt.Close(ctx)
		e.rt = nil
		if e.cache != nil {
			e.cache.Close(ctx)
			e.cache = nil
		}
	}
	return err
}

// openCache makes the cache directory dir if missing, proves a file can be written in
// it (CheckCacheDir) and opens wazero's compilation cache there. Its error is of code
// cache_unusable.
func openCache(dir string) (wazero.CompilationCache, error) {
	err := CheckCacheDir(dir)
	var cache wazero.CompilationCache
	if err == nil {
		cache, err = wazero.NewCompilationCacheWithDir(dir)
	}
	if err != nil {
		return nil, liberr.Wrap(Layer, liberr.CodeCacheUnusable, err, "the compilation cache directory %s is unusable: %v", dir, err)
	}
	return cache, nil
}

// compile compiles the guest into e.compiled, through the compilation cache when there
// is one.
func (e *Engine) compile(ctx context.Context) error {
	if e.seeded {
		// A binary built by 'make build' carries the guest compiled for its platform
		// (internal/seed); a cache directory that lacks it gets it before wazero looks.
		// A seed that cannot be written costs only the compile it would have saved.
		_, _ = seed.Install(e.cacheDir, e.guestSHA)
	}
	// wazero compiles the guest's functions on this many goroutines when the cache
	// misses (a fresh CI runner): the compile is most of an empty-cache start, and its
	// functions are independent. A hit reads the cache and compiles nothing.
	cctx := experimental.WithCompilationWorkers(ctx, runtime.GOMAXPROCS(0))
	compiled, err := e.rt.CompileModule(cctx, e.guest)
	if err != nil && e.cache != nil {
		// wazero fails the compile on a cache entry it cannot read (truncated, or its
		// checksum does not match) rather than compiling, and never replaces the entry,
		// so every later process would fail too. The guest is compiled into an empty
		// directory; if that works, the fresh entry replaces the old one and the compile
		// is tried again, now a cache hit.
		if rerr := replaceCacheEntry(cctx, e.plain, e.cacheDir, e.guest); rerr == nil {
			compiled, err = e.rt.CompileModule(cctx, e.guest)
		}
	}
	if err != nil {
		return fmt.Errorf("wasm: compile guest: %w", err)
	}
	if err := checkExports(compiled); err != nil {
		return err
	}
	e.compiled = compiled
	return nil
}

// ready starts a lazy engine (Config.Lazy) on its first use; every use after a failed
// start gets the same error. An engine compiled in NewEngine is ready. The compile is
// not cancelled with the call that happens to start it: the others wait for it too.
func (e *Engine) ready(ctx context.Context) error {
	e.compileOnce.Do(func() {
		if e.compiled == nil {
			e.compileErr = e.start(context.WithoutCancel(ctx))
		}
	})
	return e.compileErr
}

// guestDigest is the hex SHA-256 of the embedded guest, the key of its snapshot and of
// every compiled program, given the guest's record rec. It is read from the record
// (guest_version.go, which build.sh writes with the guest; a test and 'make guest-verify'
// check that they agree) rather than computed, which would cost every process half a
// millisecond, unless the guest's length is not the recorded one: a guest rebuilt and
// copied in without its record, as a build experiment does. Keyed by the stale record,
// such a guest would be given the snapshot the recorded guest prepared, a memory image
// whose addresses mean nothing to its code, and trap on its first call.
func guestDigest(guest []byte, rec GuestInfo) string {
	if rec.SHA256 != "" && int64(len(guest)) == rec.Size {
		return rec.SHA256
	}
	sum := sha256.Sum256(guest)
	return hex.EncodeToString(sum[:])
}

// replaceCacheEntry compiles guest with a compilation cache in a new directory inside
// dir, then moves every entry wazero wrote there to the same place in dir, replacing
// what is there (each by a rename, so a process reading the cache sees the old entry or
// the new one).
func replaceCacheEntry(ctx context.Context, rc wazero.RuntimeConfig, dir string, guest []byte) error {
	tmp, err := os.MkdirTemp(dir, ".recompile-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cache, err := wazero.NewCompilationCacheWithDir(tmp)
	if err != nil {
		return err
	}
	defer cache.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, rc.WithCompilationCache(cache))
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, guest); err != nil {
		return err
	}
	moved := 0
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		moved++
		return os.Rename(p, dst)
	})
	if err == nil && moved == 0 {
		err = errors.New("wasm: the compile wrote no cache entry")
	}
	return err
}

// Prepare builds the state every call starts from now rather than at the first call
// and, with a cache directory, keeps its snapshot there for the next process (it is
// read instead of built when the directory holds it already). 'libos cache warm' calls
// it after the compile.
func (e *Engine) Prepare(ctx context.Context) error {
	if !e.enter() {
		return ErrClosed
	}
	defer e.inflight.Done()
	in, err := e.get(ctx)
	if err != nil {
		return err
	}
	e.put(ctx, in)
	return nil
}

// SnapshotLoaded reports whether the state calls start from was read from the cache
// directory (kept there by an earlier process) rather than built in this one; false
// before the first call or Prepare.
func (e *Engine) SnapshotLoaded() bool {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return e.snapLoaded
}

// Close waits for calls in flight (each is bounded by its wall time), then releases every
// instance, the compiled guest and the compilation cache. Run after Close fails with
// ErrClosed.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	idle := e.idle
	e.idle = nil
	e.mu.Unlock()
	for _, in := range idle {
		in.close(ctx)
	}
	e.inflight.Wait()
	var err error
	if e.rt != nil { // nil for a lazy engine that never started
		err = e.rt.Close(ctx)
	}
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("wasm: close: %w", err)
	}
	return nil
}

// enter registers a call in flight; false once the engine is closed.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.inflight.Add(1)
	return true
}

// get returns an idle instance or a new one.
func (e *Engine) get(ctx context.Context) (*instance, error) {
	e.mu.Lock()
	for len(e.idle) == 0 && e.restoring > 0 && !e.closed {
		e.restored.Wait()
	}
	if n := len(e.idle); n > 0 {
		in := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return in, nil
	}
	e.mu.Unlock()
	return e.newInstance(ctx)
}

// release puts a used instance back (put), now or, when the caller gave a Defer, in
// the background once the caller runs the work it is handed (a goroutine that
// restores the instance and returns it to the pool). Until then the instance is out of
// the pool, as during the call, so no call can start on what this one left; the
// instance counts as a call in flight, so that Close waits for it. The work starts
// the goroutine once, however often it is called.
func (e *Engine) release(ctx context.Context, in *instance, deferTo func(func())) {
	if deferTo == nil {
		e.put(ctx, in)
		return
	}
	e.inflight.Add(1)
	var once sync.Once
	deferTo(func() {
		once.Do(func() {
			e.mu.Lock()
			e.restoring++
			e.mu.Unlock()
			go func() {
				defer e.inflight.Done()
				e.put(ctx, in)
				e.mu.Lock()
				e.restoring--
				e.mu.Unlock()
				e.restored.Broadcast()
			}()
		})
	})
}

// put restores a used instance to the snapshot and returns it to the pool, or closes it.
// A discarded instance is closed in the background: handing a memory of gigabytes back to
// the kernel takes time the caller of a stopped call should not wait for. Close waits
// for it.
func (e *Engine) put(ctx context.Context, in *instance) {
	if !in.broken && in.dirty && !e.restore(in) {
		in.broken = true
	}
	if in.broken || in.mem.Size() > e.discardAbove {
		e.inflight.Add(1)
		go func() {
			defer e.inflight.Done()
			in.close(ctx)
		}()
		return
	}
	e.mu.Lock()
	if !e.closed && len(e.idle) < e.poolSize {
		e.idle = append(e.idle, in)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	in.close(ctx)
}

// instance is one instantiated guest. It runs one call at a time.
type instance struct {
	mod                       api.Module
	mem                       api.Memory
	run, compile, alloc, free api.Function
	outPtr, outLen, brk       api.Function
	// fuel is the guest's fuel counter (internal/fuel); nil only for an uninstrumented
	// guest that a benchmark loaded.
	fuel     api.MutableGlobal
	stack    [8]uint64
	lin      *linmem.Memory // the allocator of mem, which zeroes parts of it
	capBytes int64          // the engine's hard memory cap
	broken   bool           // trapped, or the host gave up on it: never reuse
	dirty    bool           // a call ran since the snapshot was restored
}

var guestExports = []string{"_initialize", "libos_alloc", "libos_free", "libos_prepare", "libos_compile", "libos_run", "libos_out_ptr", "libos_out_len", "libos_break"}

func checkExports(c wazero.CompiledModule) error {
	fns := c.ExportedFunctions()
	for _, name := range guestExports {
		if _, ok := fns[name]; !ok {
			return fmt.Errorf("wasm: guest does not export %q", name)
		}
	}
	if _, ok := c.ExportedMemories()["memory"]; !ok {
		return errors.New("wasm: guest does not export its memory")
	}
	return nil
}

// newInstance instantiates the guest and brings it to the state every call starts from:
// the first instance of the Engine builds that state (_initialize, then libos_prepare)
// and the Engine snapshots it, unless the cache directory holds the snapshot an earlier
// process built (snapfile.go); every later one is only written the snapshot, which is
// several times cheaper than building a JavaScript context and installing the prelude.
func (e *Engine) newInstance(ctx context.Context) (*instance, error) {
	in, err := e.instantiate(ctx)
	if err != nil {
		return nil, err
	}
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	if e.snap == nil && e.snapDir != "" {
		// The snapshot an earlier process kept (snapfile.go). Should it not fit this
		// instance after all, the instance is discarded and the state built afresh.
		if snap, from, ok := loadSnapshot(e.snapDir, e.snapKey); ok {
			runs := nonZeroRuns(snap, 4<<10)
			if in.restoreRuns(snap, from, runs) {
				e.snap, e.snapFrom, e.snapRuns, e.snapLoaded = snap, from, runs, true
				return in, nil
			}
			in.close(ctx)
			if in, err = e.instantiate(ctx); err != nil {
				return nil, err
			}
		}
	}
	if e.snap != nil {
		if !in.restoreRuns(e.snap, e.snapFrom, e.snapRuns) {
			in.close(ctx)
			return nil, errors.New("wasm: instance: cannot write the snapshot")
		}
		return in, nil
	}
	snap, from, err := in.prepare(ctx)
	if err != nil {
		in.close(ctx)
		return nil, err
	}
	e.snap, e.snapFrom, e.snapRuns = snap, from, nonZeroRuns(snap, 4<<10)
	if e.snapDir != "" {
		_ = saveSnapshot(e.snapDir, e.snapKey, from, snap)
	}
	return in, nil
}

// instantiate makes an instance of the guest whose memory is as instantiation leaves it.
func (e *Engine) instantiate(ctx context.Context) (*instance, error) {
	if err := e.ready(ctx); err != nil {
		return nil, err
	}
	// Anonymous and without start functions: a reactor is initialised by _initialize,
	// or here by the snapshot. The linear memory is a reservation of the whole cap (see
	// linmem), so that the guest growing it never copies it.
	lin := linmem.New()
	mctx := experimental.WithMemoryAllocator(ctx, lin)
	mod, err := e.rt.InstantiateModule(mctx, e.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("wasm: instantiate: %w", err)
	}
	in := &instance{
		mod:      mod,
		mem:      mod.Memory(),
		run:      mod.ExportedFunction("libos_run"),
		compile:  mod.ExportedFunction("libos_compile"),
		alloc:    mod.ExportedFunction("libos_alloc"),
		free:     mod.ExportedFunction("libos_free"),
		outPtr:   mod.ExportedFunction("libos_out_ptr"),
		outLen:   mod.ExportedFunction("libos_out_len"),
		brk:      mod.ExportedFunction("libos_break"),
		lin:      lin,
		capBytes: e.maxMemory,
	}
	in.fuel, _ = mod.ExportedGlobal(fuel.GlobalExport).(api.MutableGlobal)
	return in, nil
}

// nonZeroRuns returns the [start, end) ranges of b made of blocks that are not all zero.
func nonZeroRuns(b []byte, block int) [][2]int {
	var runs [][2]int
	for i := 0; i < len(b); i += block {
		end := min(i+block, len(b))
		if allZero(b[i:end]) {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][1] == i {
			runs[n-1][1] = end
		} else {
			runs = append(runs, [2]int{i, end})
		}
	}
	return runs
}

// zeroBlock is what allZero compares with: bytes.Equal is a vectorised compare, a byte
// loop is many times slower over a megabyte.
var zeroBlock [4 << 10]byte

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// prepare runs _initialize and libos_prepare on a new instance and returns its memory
// from the start of the prepared state on.
func (in *instance) prepare(ctx context.Context) ([]byte, uint32, error) {
	if _, err := in.mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		return nil, 0, fmt.Errorf("wasm: initialize instance: %w", err)
	}
	r, err := in.mod.ExportedFunction("libos_prepare").Call(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("wasm: prepare instance: %w", err)
	}
	from := int32(r[0])
	if from < 0 {
		out, _, _ := in.output(ctx, math.MaxInt)
		return nil, 0, fmt.Errorf("wasm: prepare instance: the guest failed: %s", out)
	}
	size := in.mem.Size()
	if uint32(from) >= size {
		return nil, 0, fmt.Errorf("wasm: prepare instance: state at %d outside a memory of %d bytes", from, size)
	}
	b, _ := in.mem.Read(uint32(from), size-uint32(from))
	return bytes.Clone(b), uint32(from), nil
}

// restoreRuns writes the snapshot into a new instance. A new instance's memory is not
// all zero: instantiation wrote the guest's data segments, and prepare may have cleared
// bytes of them in blocks the snapshot holds as all zero. So every page the instance
// touched is cleared first, and then the snapshot's runs that are not zero are
// written: the instance is the snapshot at from and zero everywhere else, as restore
// leaves a pooled one.
func (in *instance) restoreRuns(snap []byte, from uint32, runs [][2]int) bool {
	end := uint64(from) + uint64(len(snap))
	if size := uint64(in.mem.Size()); end > size {
		if _, ok := in.mem.Grow(uint32((end - size + pageSize - 1) / pageSize)); !ok {
			return false
		}
	}
	mem, ok := in.mem.Read(0, in.mem.Size())
	if !ok {
		return false
	}
	// Only the pages instantiation touched can hold anything: reading the rest to find
	// out would map them all in (a megabyte a sandbox), so the kernel's page map says
	// which to clear.
	in.lin.ZeroTouched(mem)
	for _, r := range runs {
		if !in.mem.Write(from+uint32(r[0]), snap[r[0]:r[1]]) {
			return false
		}
	}
	in.dirty = false
	return true
}

// stackHot is the top of the shadow stack that restore clears whatever the call did; below
// it only the pages a call touched are (linmem.Memory.ZeroTouched). A call's frames rarely
// go deeper (about 11 KiB for the prelude and a small program).
const stackHot = 64 << 10

// restore writes the snapshot back (runs are its blocks that are not all zero): the
// JavaScript state, the allocator and every static of the guest as libos_prepare left
// them, and zeroes all the rest of the memory, so that nothing a call wrote anywhere
// survives it (ABI.md, "The snapshot"):
//
//   - the shadow stack below from, whose dead frames hold what the call's C code had in
//     its locals: its top stackHot bytes are cleared, and below them every page the
//     kernel says was touched;
//   - the memory past the snapshot up to where the call's allocator reached (libos_break),
//     free space to the restored allocator, cleared;
//   - the memory past that break up to the memory's end, which a guest that keeps the ABI
//     never writes: every page of it the kernel says was touched is cleared all the same.
//
// The guest's word (the break) only splits the memory past the snapshot into the part
// cleared outright and the part checked page by page; it never leaves a byte unzeroed.
// A break outside the memory, or below the snapshot's end, which a guest that kept the
// ABI never reports, checks everything past the snapshot.
func (in *instance) restore(snap []byte, from uint32, runs [][2]int) bool {
	size := uint64(in.mem.Size())
	end := uint64(from) + uint64(len(snap))
	brk := end
	if end < size {
		in.idleFuel()
		st := in.stack[:1]
		if err := in.brk.CallWithStack(context.Background(), st); err != nil {
			return false
		}
		if b := uint64(api.DecodeU32(st[0])); b >= end && b <= size {
			brk = b
		}
	}
	if end > size {
		if _, ok := in.mem.Grow(uint32((end - size + pageSize - 1) / pageSize)); !ok {
			return false
		}
		size = uint64(in.mem.Size())
	}
	mem, ok := in.mem.Read(0, uint32(size))
	if !ok {
		return false
	}
	// The blocks of the snapshot that are all zero (48 of its 384 KiB, free space of the
	// prepared heap) are cleared rather than copied, which does not read them from snap.
	dst, at := mem[from:end], 0
	for _, r := range runs {
		clear(dst[at:r[0]])
		copy(dst[r[0]:r[1]], snap[r[0]:r[1]])
		at = r[1]
	}
	clear(dst[at:])
	hot := uint64(from) - min(uint64(from), stackHot)
	in.lin.ZeroTouched(mem[:hot])
	clear(mem[hot:from])
	clear(mem[end:brk])
	in.lin.ZeroTouched(mem[brk:size])
	in.dirty = false
	return true
}

// restore brings a used instance back to the snapshot.
func (e *Engine) restore(in *instance) bool {
	return in.restore(e.snap, e.snapFrom, e.snapRuns)
}

func (in *instance) close(ctx context.Context) {
	in.mod.Close(ctx)
}
