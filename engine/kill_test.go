package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// errInjected is the write failure the test injects.
var errInjected = errors.New("injected write failure")

// TestKillNeverLeavesApprovalsPending: Kill's contract — "its pending approvals are
// denied" — holds whenever Kill reports success, and a store that cannot write makes
// Kill fail, never succeed with an approval still pending. A call waits on an
// operator approval; then, for every write operation n that Kill makes, the store
// fails at the n-th, and Kill's answer is checked against what the store holds.
func TestKillNeverLeavesApprovalsPending(t *testing.T) {
	img := loadImage(t, "approvals.yaml")
	for n := int64(1); ; n++ {
		fired := false
		t.Run(fmt.Sprintf("write %d fails", n), func(t *testing.T) {
			var armed atomic.Bool
			var seen atomic.Int64
			mem := vfs.NewCrashableMem()
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
					return nil
				}
				if seen.Add(1) == n {
					return errInjected
				}
				return nil
			}))
			st, err := store.Open("/data", store.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			k, err := engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer func() {
				cancel()
				k.Close()
				st.Close()
			}()
			pid, err := k.SpawnImage(ctx, img)
			if err != nil {
				t.Fatal(err)
			}
			waiting := make(chan error, 1)
			go func() {
				_, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo","arguments":{"x":1}}`))
				waiting <- err
			}()
			waitPendingOf(t, k, pid)
			armed.Store(true)
			kerr := k.Kill(context.Background(), pid)
			fired = seen.Load() >= n
			if kerr == nil {
				// Success: durable, and nothing of pid is left pending.
				werr := <-waiting
				waiterFailed := errors.Is(werr, errInjected)
				if !waiterFailed && !errors.Is(werr, engine.ErrApprovalDenied) {
					t.Fatalf("the waiting call: %v, want approval_denied", werr)
				}
				as, err := k.Approvals(pid)
				if err != nil && waiterFailed {
					// The write that failed was the waiting call's refusal, after Kill's
					// own write was synced: the store is unusable until reopened, and
					// what Kill acknowledged must be there when it is, as after a crash.
					k.Close()
					st.Close()
					if st, err = store.Open("/data", store.Options{FS: mem.CrashClone(vfs.CrashCloneCfg{})}); err != nil {
						t.Fatal(err)
					}
					if k, err = engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tools.Echo()}}); err != nil {
						t.Fatal(err)
					}
					as, err = k.Approvals(pid)
				}
				if err != nil {
					t.Fatalf("Kill succeeded but the store cannot be read: %v", err)
				}
				for _, a := range as {
					if a.State == engine.ApprovalPending {
						t.Fatalf("Kill succeeded with approval %s still pending", a.ID)
					}
				}
				return
			}
			if !fired {
				t.Fatalf("Kill failed without a write failure: %v", kerr)
			}
			if liberr.CodeOf(kerr) != engine.CodeStorage || !errors.Is(kerr, errInjected) {
				t.Fatalf("Kill under a failing store: %v (%s), want storage_failed wrapping the write error", kerr, liberr.CodeOf(kerr))
			}
			// Not killed: the process is still in the live table.
			if _, err := k.Process(pid); err != nil {
				t.Fatalf("after a failed Kill the process is gone: %v", err)
			}
		})
		if !fired || n > 16 {
			break
		}
	}
}

// waitPendingOf waits until pid has a pending approval.
func waitPendingOf(t *testing.T, k *engine.Kernel, pid string) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		as, err := k.Approvals(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.State == engine.ApprovalPending {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no pending approval")
}
