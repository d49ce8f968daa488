package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// deferredPoint is the state of a deferred workload at one crash: the file system,
// the order in which ops were applied so far, and the ops acknowledged as durable
// (synced ops that returned nil, and Sync calls that returned nil cover everything
// applied before them).
type deferredPoint struct {
	fs      *vfs.MemFS
	applied []int
	durable map[int]bool
}

// deferredLog records what a deferred workload did, in WAL order.
type deferredLog struct {
	mu      sync.Mutex
	applied []int        // ops in the order their batches were applied (fn runs under wmu)
	durable map[int]bool // ops a synced write has acknowledged
}

func (l *deferredLog) apply(i int) {
	l.mu.Lock()
	l.applied = append(l.applied, i)
	l.mu.Unlock()
}

// ack marks op i and every op applied before position upTo as durable.
func (l *deferredLog) ack(upTo int) {
	l.mu.Lock()
	for _, j := range l.applied[:upTo] {
		l.durable[j] = true
	}
	l.mu.Unlock()
}

func (l *deferredLog) snapshot(fs *vfs.MemFS) deferredPoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := make(map[int]bool, len(l.durable))
	for i := range l.durable {
		d[i] = true
	}
	return deferredPoint{fs: fs, applied: slices.Clone(l.applied), durable: d}
}

// runDeferredOp runs op i as an UpdateDeferred (deferred) or an Update, and on an
// acknowledgement marks what it made durable.
func runDeferredOp(s *Store, log *deferredLog, i int, deferred bool) error {
	pos := -1
	fn := func(tx *Tx) error {
		if err := crashOp(tx, i); err != nil {
			return err
		}
		log.mu.Lock()
		pos = len(log.applied)
		log.applied = append(log.applied, i)
		log.mu.Unlock()
		return nil
	}
	if deferred {
		return s.UpdateDeferred(ctx, fn)
	}
	if err := s.Update(ctx, fn); err != nil {
		return err
	}
	log.ack(pos + 1)
	return nil
}

// checkPrefix checks a crash state against the rules of deferred durability: every
// op is whole or absent; the ops present are exactly a prefix of the order in which
// they were applied; and every op acknowledged as durable is present.
func checkPrefix(t *testing.T, p deferredPoint, n int) int {
	t.Helper()
	present := crashState(t, p.fs, n)
	k := 0
	for k < len(p.applied) && present[p.applied[k]] {
		k++
	}
	for _, j := range p.applied[k:] {
		if present[j] {
			t.Fatalf("op %d (applied at position %d) survived the crash but op %d applied before it (position %d) did not",
				j, slices.Index(p.applied, j), p.applied[k], k)
		}
	}
	if k != len(present) {
		t.Fatalf("%d ops present, but only %d of them were applied before the crash", len(present), k)
	}
	for i := range p.durable {
		if !present[i] {
			t.Fatalf("op %d was acknowledged as durable and is lost", i)
		}
	}
	return k
}

// "deferred writes are whole or absent, and the prefix property holds — if a synced
// write is present after a crash, every write applied before it (deferred or not) is
// present". Two of three ops are deferred; the workload crashes at every write
// operation, keeping only synced data or a random part of unsynced data.
func TestCrashDeferredPrefix(t *testing.T) {
	n := 150
	if testing.Short() || raceEnabled {
		n = 45
	}
	if v, _ := strconv.Atoi(os.Getenv("LIBOS_STORE_CRASH_OPS")); v > 0 {
		n = v
	}
	for _, tc := range []struct{ conc, pct int }{{1, 0}, {4, 0}, {4, 50}, {4, 100}} {
		t.Run(fmt.Sprintf("conc=%d/unsynced=%d%%", tc.conc, tc.pct), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			log := &deferredLog{durable: map[int]bool{}}
			rng := rand.New(rand.NewPCG(uint64(tc.conc*100+tc.pct), 3))
			var (
				pointsMu sync.Mutex
				points   []deferredPoint
				writes   atomic.Int64
				armed    atomic.Bool
			)
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
					return nil
				}
				writes.Add(1)
				pointsMu.Lock()
				defer pointsMu.Unlock()
				cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: tc.pct}
				if tc.pct > 0 {
					cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), 4))
				}
				// The clone and the log are taken under log.mu: every op in the WAL
				// at this instant is in applied (fn runs before its batch is applied),
				// and every op in durable was synced before it was marked.
				log.mu.Lock()
				clone := mem.CrashClone(cfg)
				d := make(map[int]bool, len(log.durable))
				for i := range log.durable {
					d[i] = true
				}
				points = append(points, deferredPoint{fs: clone, applied: slices.Clone(log.applied), durable: d})
				log.mu.Unlock()
				return nil
			}))
			s, err := Open("/data", Options{FS: fs, tune: func(o *pebble.Options) {
				o.MemTableSize = 64 << 10 // WAL rotations and flushes happen mid-workload
			}})
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			var next atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < tc.conc; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= n {
							return
						}
						if err := runDeferredOp(s, log, i, i%3 != 2); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			armed.Store(false)
			// "it becomes durable with the next synced write or Close": after Close,
			// a clone that keeps only synced data has every op.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			log.ack(len(log.applied))
			points = append(points, log.snapshot(mem.CrashClone(vfs.CrashCloneCfg{})))

			lost := 0
			for _, p := range points {
				present := checkPrefix(t, p, n)
				lost += len(p.applied) - present
			}
			// Deferred batches share WAL writes, and concurrent synced ones share
			// syncs, so there are fewer write operations than ops; a third of the ops
			// are synced and each needs a write of its own group.
			if len(points) < n/6 {
				t.Fatalf("only %d crash points (%d write operations) for %d ops", len(points), writes.Load(), n)
			}
			if tc.pct == 0 && lost == 0 {
				t.Fatalf("no crash point lost a deferred op: the workload did not defer anything")
			}
			t.Logf("%d crash points; %d applied-but-unsynced ops lost in all, always a suffix", len(points), lost)
		})
	}
}

// "it becomes durable with the next synced write": a deferred write is visible at
// once, absent from a crash that keeps only synced data, and present after an Update
// of something else or a Sync.
func TestDeferredDurableWithNextSync(t *testing.T) {
	for _, how := range []string{"update", "sync", "close"} {
		t.Run(how, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s, err := Open("/data", Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			log := &deferredLog{durable: map[int]bool{}}
			for i := 0; i < 3; i++ {
				if err := runDeferredOp(s, log, i, true); err != nil {
					t.Fatal(err)
				}
			}
			if v, err := s.KVGet("w1", "op/00001/a"); err != nil || !strings.HasPrefix(string(v), `{"op":1,`) {
				t.Fatalf("a deferred write is visible at once: %q %v", v, err)
			}
			if got := checkPrefix(t, log.snapshot(mem.CrashClone(vfs.CrashCloneCfg{})), 4); got != 0 {
				t.Fatalf("%d deferred ops survived a crash before any sync; want 0", got)
			}
			switch how {
			case "update":
				if err := runDeferredOp(s, log, 3, false); err != nil {
					t.Fatal(err)
				}
			case "sync":
				if err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				log.ack(len(log.applied))
			case "close":
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				log.ack(len(log.applied))
			}
			p := log.snapshot(mem.CrashClone(vfs.CrashCloneCfg{}))
			if got := checkPrefix(t, p, 4); got != len(p.applied) {
				t.Fatalf("%d of %d ops durable after the %s", got, len(p.applied), how)
			}
		})
	}
}

// Sync "costs nothing when no deferred write waits": it syncs the WAL only when a
// deferred batch was applied since the last synced write.
func TestSyncOnlyWhenDeferredWaits(t *testing.T) {
	var syncs atomic.Int64
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			syncs.Add(1)
		}
		return nil
	}))
	s, err := Open("/data", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log := &deferredLog{durable: map[int]bool{}}
	step := func(what string, op func() error, wantSync bool) {
		t.Helper()
		before := syncs.Load()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		if got := syncs.Load() > before; got != wantSync {
			t.Fatalf("%s: WAL synced = %v, want %v", what, got, wantSync)
		}
	}
	step("synced update", func() error { return runDeferredOp(s, log, 0, false) }, true)
	step("sync with nothing deferred", func() error { return s.Sync(ctx) }, false)
	step("deferred update", func() error { return runDeferredOp(s, log, 1, true) }, false)
	step("sync after a deferred update", func() error { return s.Sync(ctx) }, true)
	step("second sync", func() error { return s.Sync(ctx) }, false)
	step("deferred update", func() error { return runDeferredOp(s, log, 2, true) }, false)
	step("synced update covering it", func() error { return runDeferredOp(s, log, 3, false) }, true)
	step("sync after the synced update", func() error { return s.Sync(ctx) }, false)
}

// "with errorfs, inject failures on sync and write and assert 100% are returned to
// the caller and none is acknowledged", with deferred writes: a deferred write does
// not wait for the disk, so its failure is returned by the next synced write, Sync or
// Close. Once anything failed, nothing later is acknowledged, and after a crash every
// acknowledged op is present and the present ops are a prefix of the applied ones.
func TestInjectedWriteErrorsDeferred(t *testing.T) {
	const n = 40
	injected, returned := 0, 0
	kinds := map[string][]errorfs.OpKind{
		"write": {errorfs.OpFileWrite, errorfs.OpFileWriteAt},
		"sync":  {errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo},
	}
	for _, kind := range []string{"write", "sync"} {
		for k := 1; ; k++ {
			mem := vfs.NewCrashableMem()
			var count atomic.Int64
			var fired, armed atomic.Bool
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || !slices.Contains(kinds[kind], op.Kind) || !strings.HasSuffix(op.Path, ".log") {
					return nil
				}
				if count.Add(1) == int64(k) {
					fired.Store(true)
					return errorfs.ErrInjected
				}
				return nil
			}))
			s, err := Open("/data", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			log := &deferredLog{durable: map[int]bool{}}
			failedAt := -1
			for i := 0; i < n; i++ {
				var err error
				switch i % 4 {
				case 0, 1:
					err = runDeferredOp(s, log, i, true)
				case 2:
					err = runDeferredOp(s, log, i, false)
				case 3:
					err = runDeferredOp(s, log, i, true)
					if err == nil {
						log.mu.Lock()
						upTo := len(log.applied)
						log.mu.Unlock()
						if err = s.Sync(ctx); err == nil {
							log.ack(upTo)
						}
					}
				}
				switch {
				case err == nil && failedAt >= 0:
					t.Fatalf("%v #%d: op %d acknowledged after op %d failed", kind, k, i, failedAt)
				case err != nil && failedAt < 0:
					if !errors.Is(err, ErrIO) {
						t.Fatalf("%v #%d: op %d: %v, want an io error", kind, k, i, err)
					}
					failedAt = i
				}
			}
			cerr := s.Close()
			armed.Store(false)
			if !fired.Load() {
				if k == 1 {
					t.Fatalf("%v: never reached", kind)
				}
				break
			}
			injected++
			if failedAt >= 0 || cerr != nil {
				returned++
			} else {
				t.Fatalf("%v #%d: a failure was injected but no op and not Close returned an error", kind, k)
			}
			if failedAt < 0 {
				// The failure was returned by Close: what it did not sync is not
				// acknowledged.
				if !errors.Is(cerr, ErrIO) {
					t.Fatalf("%v #%d: close: %v, want an io error", kind, k, cerr)
				}
			}
			checkPrefix(t, log.snapshot(mem.CrashClone(vfs.CrashCloneCfg{})), n)
		}
	}
	if injected != returned || injected == 0 {
		t.Fatalf("%d failures injected, %d returned", injected, returned)
	}
	t.Logf("%d injected WAL write/sync failures with deferred writes, all returned, none acknowledged", injected)
}
