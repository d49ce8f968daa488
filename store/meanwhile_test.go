package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// UpdateMeanwhile: "meanwhile runs once before it returns: after the batch is applied
// and visible, outside the store's write lock, just before the store asks for the sync
// that makes it durable; or, when nothing was applied, before the error is returned",
// and "the durability contract is Update's": nothing acknowledged is lost. meanwhile
// sees the batch in Pebble, is not yet covered by a sync (a crash then loses the
// write, which nobody was told of), and once UpdateMeanwhile returns nil the write
// survives a crash.
func TestUpdateMeanwhile(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("/data", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for i := range 3 {
		ran := 0
		var visible, lockFree bool
		var before *vfs.MemFS
		err := s.UpdateMeanwhile(ctx, func(tx *Tx) error { return crashOp(tx, i) }, func() {
			ran++
			_, closer, err := s.db.Get(kvKey(fmt.Sprintf("w%d", i%crashPIDs), fmt.Sprintf("op/%05d/a", i)))
			if visible = err == nil; visible {
				closer.Close()
			}
			if lockFree = s.wmu.TryLock(); lockFree {
				s.wmu.Unlock()
			}
			before = mem.CrashClone(vfs.CrashCloneCfg{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if ran != 1 || !visible || !lockFree {
			t.Fatalf("op %d: meanwhile ran %d times (want 1), saw the batch: %v, outside the write lock: %v", i, ran, visible, lockFree)
		}
		// Before its sync the op may not have survived a crash; after UpdateMeanwhile
		// returned it must have, with every op before it.
		acked := map[int]bool{}
		for j := range i {
			acked[j] = true
		}
		if got := checkCrashState(t, before, i+1, acked); got != i {
			t.Fatalf("a crash while meanwhile ran left %d ops, want the %d acknowledged before", got, i)
		}
		acked[i] = true
		if got := checkCrashState(t, mem.CrashClone(vfs.CrashCloneCfg{}), i+1, acked); got != i+1 {
			t.Fatalf("a crash after UpdateMeanwhile returned left %d ops, want %d", got, i+1)
		}
	}

	// Nothing applied: fn fails, or writes nothing. meanwhile still runs once.
	for _, fn := range []func(tx *Tx) error{
		func(*Tx) error { return errors.New("refused") },
		func(*Tx) error { return nil },
	} {
		ran := 0
		s.UpdateMeanwhile(ctx, fn, func() { ran++ })
		if ran != 1 {
			t.Fatalf("meanwhile ran %d times for an update that applied nothing, want 1", ran)
		}
	}
}

// The same with concurrent writers, where UpdateMeanwhile commits the batch with its sync
// in one go while another is waiting for a sync: meanwhile still runs exactly once for
// every update, after its batch is applied, and everything acknowledged survives a crash.
func TestUpdateMeanwhileConcurrent(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("/data", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 64
	var ran [n]atomic.Int32
	var visible [n]atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.UpdateMeanwhile(ctx, func(tx *Tx) error { return crashOp(tx, i) }, func() {
				ran[i].Add(1)
				_, closer, err := s.db.Get(kvKey(fmt.Sprintf("w%d", i%crashPIDs), fmt.Sprintf("op/%05d/a", i)))
				if err == nil {
					visible[i].Store(true)
					closer.Close()
				}
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	acked := map[int]bool{}
	for i := range n {
		if got := ran[i].Load(); got != 1 || !visible[i].Load() {
			t.Fatalf("op %d: meanwhile ran %d times (want 1), saw the batch: %v", i, got, visible[i].Load())
		}
		acked[i] = true
	}
	if got := checkCrashState(t, mem.CrashClone(vfs.CrashCloneCfg{}), n, acked); got != n {
		t.Fatalf("a crash after every UpdateMeanwhile returned left %d ops, want %d", got, n)
	}
}
