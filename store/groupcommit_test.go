package store

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walSyncs are the operations that make the WAL durable.
var walSyncs = []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}

// heldSync opens a store on a crashable MemFS whose first WAL sync after arm() is held
// until release is closed, then answers with result (nil: the sync succeeds). It counts
// the WAL syncs made after arm().
type heldSync struct {
	mem     *vfs.MemFS
	s       *Store
	armed   atomic.Bool
	held    atomic.Bool
	syncs   atomic.Int64
	release chan struct{}
	result  error
}

func openHeldSync(t *testing.T, result error) *heldSync {
	t.Helper()
	h := &heldSync{mem: vfs.NewCrashableMem(), release: make(chan struct{}), result: result}
	fs := errorfs.Wrap(h.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !h.armed.Load() || !slices.Contains(walSyncs, op.Kind) || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		h.syncs.Add(1)
		if h.held.CompareAndSwap(false, true) {
			<-h.release
			return h.result
		}
		return nil
	}))
	s, err := Open("/data", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

// runHeld starts n Updates (crashOp i) while the first WAL sync is held, releases it
// once every Update's batch has been assembled, and returns each Update's error.
//
// Batches are assembled and applied one at a time (Store.wmu), so when the n-th has
// been assembled the n-1 before it are already in the WAL behind the held sync.
func runHeld(t *testing.T, h *heldSync, n int) []error {
	t.Helper()
	var assembled atomic.Int64
	all := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	h.armed.Store(true)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.s.Update(ctx, func(tx *Tx) error {
				if err := crashOp(tx, i); err != nil {
					return err
				}
				if assembled.Add(1) == int64(n) {
					close(all)
				}
				return nil
			})
		}()
	}
	<-all
	close(h.release)
	wg.Wait()
	h.armed.Store(false)
	return errs
}

// "Concurrent writers share WAL syncs (group commit)" (package doc). Sixteen Updates
// submitted while one WAL sync is in progress are all acknowledged by at most two more
// syncs, not sixteen, and every acknowledged one survives a crash.
func TestGroupCommitSharesSyncs(t *testing.T) {
	const n = 16
	h := openHeldSync(t, nil)
	errs := runHeld(t, h, n)
	acked := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		acked[i] = true
	}
	// The held sync covers the first batch (and any that reached the WAL with it); the
	// batches queued behind it share the next sync, the last one assembled possibly one
	// more.
	if got := h.syncs.Load(); got > 3 {
		t.Fatalf("%d concurrent updates took %d WAL syncs, want at most 3 (group commit)", n, got)
	}
	// A crash that keeps only synced data still holds every acknowledged update, and the
	// hash chain of every log verifies.
	checkCrashState(t, h.mem.CrashClone(vfs.CrashCloneCfg{}), n, acked)
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent updates, %d WAL syncs", n, h.syncs.Load())
}

// "nothing acknowledged is lost", with errors delivered to every waiter: when the WAL
// sync that a group of concurrent Updates waits on fails, every one of them fails with
// an io error (none is acknowledged), the store refuses what follows, and after a
// crash each update is whole or absent.
func TestGroupCommitFailedSyncFailsEveryWaiter(t *testing.T) {
	const n = 16
	h := openHeldSync(t, errorfs.ErrInjected)
	errs := runHeld(t, h, n)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("update %d acknowledged although the sync it waited on failed", i)
		}
		if !errors.Is(err, ErrIO) {
			t.Fatalf("update %d: %v, want an io error", i, err)
		}
	}
	wantCode(t, h.s.Update(ctx, func(tx *Tx) error { return crashOp(tx, n) }), CodeIO)
	if err := h.s.Close(); err != nil && !errors.Is(err, ErrIO) {
		t.Fatalf("close after the failed sync: %v", err)
	}
	checkCrashState(t, h.mem.CrashClone(vfs.CrashCloneCfg{}), n+1, nil)
}

// Close in the middle of concurrent writers: "Close waits for operations in flight".
// Every Update either is acknowledged, and then survives a crash right after Close,
// or fails with closed and wrote nothing; none hangs, and the logs verify.
func TestGroupCommitCloseInTheMiddle(t *testing.T) {
	const writers = 8
	n := 400
	if raceEnabled {
		n = 120
	}
	mem := vfs.NewCrashableMem()
	s, err := Open("/data", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	var mu sync.Mutex
	acked := map[int]bool{}
	refused := map[int]bool{}
	half := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				err := s.Update(ctx, func(tx *Tx) error { return crashOp(tx, i) })
				mu.Lock()
				switch {
				case err == nil:
					acked[i] = true
					if len(acked) == n/2 {
						once.Do(func() { close(half) })
					}
				case errors.Is(err, ErrClosed):
					refused[i] = true
				default:
					t.Errorf("update %d: %v", i, err)
				}
				mu.Unlock()
			}
		}()
	}
	<-half
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(acked)+len(refused) != n {
		t.Fatalf("%d acknowledged + %d refused of %d updates", len(acked), len(refused), n)
	}
	present := checkCrashState(t, mem.CrashClone(vfs.CrashCloneCfg{}), n, acked)
	if present != len(acked) {
		t.Fatalf("%d updates present after the close, %d acknowledged: a refused update wrote", present, len(acked))
	}
	t.Logf("%d acknowledged before the close, %d refused after it", len(acked), len(refused))
}
