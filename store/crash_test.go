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

// The crash workload: op i is one Update that appends an event carrying op=i to
// process w<i%3>, and puts two kv entries with the same value. After a crash an op
// is whole (all three) or absent (none); an acknowledged op is whole.
const crashPIDs = 3

func crashOp(tx *Tx, i int) error {
	pid := fmt.Sprintf("w%d", i%crashPIDs)
	val := []byte(fmt.Sprintf(`{"op":%d,"pad":%q}`, i, strings.Repeat("x", 200+i%300)))
	if _, err := tx.Append(pid, "op", val); err != nil {
		return err
	}
	if err := tx.KVPut(pid, fmt.Sprintf("op/%05d/a", i), val); err != nil {
		return err
	}
	return tx.KVPut(pid, fmt.Sprintf("op/%05d/b", i), val)
}

// checkCrashState opens fs and checks the whole-or-absent rule for ops [0, n) and
// presence of every op in acked. It returns how many ops were present.
func checkCrashState(t *testing.T, fs vfs.FS, n int, acked map[int]bool) int {
	t.Helper()
	present := crashState(t, fs, n)
	for i := range acked {
		if !present[i] {
			t.Fatalf("acknowledged op %d lost", i)
		}
	}
	return len(present)
}

// crashState opens fs, verifies every log, checks that each op in [0, n) is whole
// (its event and both kv entries) or absent (none of them), and returns the ops that
// are present.
func crashState(t *testing.T, fs vfs.FS, n int) map[int]bool {
	t.Helper()
	s, err := Open("/data", Options{FS: fs})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	inLog := map[int]bool{}
	for w := 0; w < crashPIDs; w++ {
		pid := fmt.Sprintf("w%d", w)
		if err := s.Verify(pid); err != nil {
			t.Fatalf("after crash: %v", err)
		}
		es, err := s.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			var op int
			if _, err := fmt.Sscanf(string(e.Data), `{"op":%d`, &op); err != nil {
				t.Fatalf("event data %s", e.Data)
			}
			inLog[op] = true
		}
	}
	present := map[int]bool{}
	for i := 0; i < n; i++ {
		pid := fmt.Sprintf("w%d", i%crashPIDs)
		a, errA := s.KVGet(pid, fmt.Sprintf("op/%05d/a", i))
		b, errB := s.KVGet(pid, fmt.Sprintf("op/%05d/b", i))
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
		}
		whole := errA == nil && errB == nil && inLog[i] && string(a) == string(b) && strings.HasPrefix(string(a), fmt.Sprintf(`{"op":%d,`, i))
		absent := errA != nil && errB != nil && !inLog[i]
		switch {
		case !whole && !absent:
			t.Fatalf("op %d torn (a=%v b=%v event=%v)", i, errA, errB, inLog[i])
		case whole:
			present[i] = true
		}
	}
	return present
}

type crashPoint struct {
	fs    *vfs.MemFS
	acked map[int]bool
}

// runCrashWorkload runs n ops from conc goroutines on a crashable MemFS and takes a
// crash clone after every k-th write operation.
func runCrashWorkload(t *testing.T, n, conc, k, unsyncedPct int, seed int64) []crashPoint {
	mem := vfs.NewCrashableMem()
	var (
		ackMu  sync.Mutex
		acked  = map[int]bool{}
		points []crashPoint
		writes atomic.Int64
		armed  atomic.Bool
		rng    = rand.New(rand.NewPCG(uint64(seed), 1))
	)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		if writes.Add(1)%int64(k) != 0 {
			return nil
		}
		ackMu.Lock()
		defer ackMu.Unlock()
		snap := make(map[int]bool, len(acked))
		for i := range acked {
			snap[i] = true
		}
		cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPct}
		if unsyncedPct > 0 {
			cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), 2))
		}
		points = append(points, crashPoint{fs: mem.CrashClone(cfg), acked: snap})
		return nil
	}))
	s, err := Open("/data", Options{FS: fs, tune: func(o *pebble.Options) {
		o.MemTableSize = 64 << 10 // flush every ~100 ops so crashes hit flushes too
	}})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := s.Update(ctx, func(tx *Tx) error { return crashOp(tx, i) }); err != nil {
					t.Error(err)
					return
				}
				ackMu.Lock()
				acked[i] = true
				ackMu.Unlock()
			}
		}()
	}
	wg.Wait()
	armed.Store(false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ackMu.Lock()
	defer ackMu.Unlock()
	// The state after a clean close is the last crash point: everything acked.
	final := map[int]bool{}
	for i := 0; i < n; i++ {
		final[i] = true
	}
	return append(points, crashPoint{fs: mem.CrashClone(vfs.CrashCloneCfg{}), acked: final})
}

// "crash after every k-th write operation of a workload, reopen, and assert that
// every acknowledged write is present whole and every unacknowledged one is whole
// or absent". Crash clones keep only synced data (0%) or a random part of unsynced
// data (50%, 100%).
func TestCrashEveryKthWrite(t *testing.T) {
	n, k := 150, 1
	if testing.Short() || raceEnabled {
		n, k = 40, 2
	}
	if v, _ := strconv.Atoi(os.Getenv("LIBOS_STORE_CRASH_OPS")); v > 0 {
		n = v
	}
	for _, tc := range []struct {
		conc, pct int
	}{{1, 0}, {4, 0}, {4, 50}, {4, 100}} {
		t.Run(fmt.Sprintf("conc=%d/unsynced=%d%%", tc.conc, tc.pct), func(t *testing.T) {
			points := runCrashWorkload(t, n, tc.conc, k, tc.pct, int64(tc.conc*100+tc.pct))
			checked, acked := 0, 0
			for _, p := range points {
				present := checkCrashState(t, p.fs, n, p.acked)
				if present < len(p.acked) {
					t.Fatalf("present %d < acked %d", present, len(p.acked))
				}
				checked++
				acked += len(p.acked)
			}
			if checked < n/4 {
				t.Fatalf("only %d crash points for %d ops", checked, n)
			}
			t.Logf("%d crash points, %d acknowledged ops checked", checked, acked)
		})
	}
}

// "with errorfs, inject failures on sync and write and assert 100% are returned to
// the caller and none is acknowledged." The k-th write or sync of the WAL fails;
// the op in flight must fail, every later op must fail (the store stops after a
// failed write), and after a crash every acknowledged op is whole while the failed
// ones are whole or absent.
func TestInjectedWriteErrors(t *testing.T) {
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
			var fired atomic.Bool
			var inFlight atomic.Int64
			inFlight.Store(-1)
			var firedDuring atomic.Int64
			firedDuring.Store(-1)
			armed := atomic.Bool{}
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || !slices.Contains(kinds[kind], op.Kind) || !strings.HasSuffix(op.Path, ".log") {
					return nil
				}
				if count.Add(1) == int64(k) {
					fired.Store(true)
					firedDuring.Store(inFlight.Load())
					return errorfs.ErrInjected
				}
				return nil
			}))
			s, err := Open("/data", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			acked := map[int]bool{}
			failedAt := -1
			for i := 0; i < n; i++ {
				inFlight.Store(int64(i))
				err := s.Update(ctx, func(tx *Tx) error { return crashOp(tx, i) })
				switch {
				case err == nil && failedAt >= 0:
					t.Fatalf("%v #%d: op %d acknowledged after the failed op %d", kind, k, i, failedAt)
				case err == nil:
					acked[i] = true
				default:
					if !errors.Is(err, ErrIO) || !errors.Is(err, errorfs.ErrInjected) && failedAt < 0 {
						t.Fatalf("%v #%d: op %d: %v, want io error wrapping the injected one", kind, k, i, err)
					}
					if failedAt < 0 {
						failedAt = i
						returned++
					}
				}
			}
			armed.Store(false)
			if !fired.Load() {
				s.Close()
				if k == 1 {
					t.Fatalf("%v: never reached", kind)
				}
				break
			}
			injected++
			if failedAt < 0 {
				t.Fatalf("%v #%d: injected during op %d, but every op was acknowledged", kind, k, firedDuring.Load())
			}
			if int64(failedAt) != firedDuring.Load() {
				t.Fatalf("%v #%d: injected during op %d but op %d failed first", kind, k, firedDuring.Load(), failedAt)
			}
			_, err = s.Events("w0", 0, 0)
			wantCode(t, err, CodeIO)
			if err := s.Close(); err != nil && !errors.Is(err, ErrIO) {
				t.Fatalf("close after failure: %v", err)
			}
			checkCrashState(t, mem.CrashClone(vfs.CrashCloneCfg{}), n, acked)
		}
	}
	if injected != returned || injected == 0 {
		t.Fatalf("%d failures injected, %d returned", injected, returned)
	}
	t.Logf("%d injected WAL write/sync failures, all returned, none acknowledged", injected)
}
