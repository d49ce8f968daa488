package syscalls

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/agentlibos/libos/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashable opens a store on a crashable in-memory file system.
func crashable(t *testing.T) (*store.Store, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	st, err := store.Open("/libos", store.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, mem
}

// afterCrash opens what a crash at this moment would leave (synced data only) and
// reports whether pid's kv key exists, how many events pid has and its budget counter.
func afterCrash(t *testing.T, mem *vfs.MemFS, pid, key, budget string) (kv bool, events int, used int64) {
	t.Helper()
	st, err := store.Open("/libos", store.Options{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer st.Close()
	if err := st.Verify(pid); err != nil {
		t.Fatalf("after crash: %v", err)
	}
	_, err = st.KVGet(pid, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	kv = err == nil
	h, err := st.Head(pid)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Budget(pid, budget)
	if err != nil {
		t.Fatal(err)
	}
	return kv, int(h.Seq), b.Used
}

// "the router's audit events and staged kv writes inside a call are deferred; they
// are durable by the call's synced settlement": for a Deferred caller a kv.put is
// visible at once, absent from a crash before the settlement, and present with its
// audit event and budget charge after it. A caller that is not Deferred is synced
// before Syscall returns.
func TestDeferredCallerIsDurableWithTheSettlement(t *testing.T) {
	for _, deferred := range []bool{true, false} {
		name := map[bool]string{true: "deferred", false: "synced"}[deferred]
		t.Run(name, func(t *testing.T) {
			st, mem := crashable(t)
			r, _ := newRouter(t, RouterConfig{Store: st})
			c := Caller{PID: "p", Tool: "t", Capabilities: NewCapSet(CapKVWrite, CapKVRead),
				Policy: mustPolicy(t, PolicySpec{RouteBudgets: map[string]int64{"kv": 10}}), Deferred: deferred}
			if _, err := r.For(c).Syscall(context.Background(), "kv.put", json.RawMessage(`{"key":"k","value":1}`)); err != nil {
				t.Fatal(err)
			}
			res, err := r.For(c).Syscall(context.Background(), "kv.get", json.RawMessage(`{"key":"k"}`))
			if err != nil || string(res) != `{"found":true,"value":1}` {
				t.Fatalf("the write is visible at once: %s %v", res, err)
			}
			kv, events, used := afterCrash(t, mem, "p", "k", "syscalls:kv")
			if deferred && (kv || events != 0 || used != 0) {
				t.Fatalf("before the settlement a crash keeps nothing of the call: kv=%v events=%d budget=%d", kv, events, used)
			}
			if !deferred && (!kv || events != 2 || used != 2) {
				t.Fatalf("a synced caller's syscalls are durable on return: kv=%v events=%d budget=%d", kv, events, used)
			}
			// The settlement: one synced write of the same process.
			if _, err := st.Append(context.Background(), "p", store.EventToolCalled, json.RawMessage(`{"call_id":"c"}`)); err != nil {
				t.Fatal(err)
			}
			if kv, events, used := afterCrash(t, mem, "p", "k", "syscalls:kv"); !kv || events != 3 || used != 2 {
				t.Fatalf("after the synced settlement everything before it is durable: kv=%v events=%d budget=%d", kv, events, used)
			}
		})
	}
}

// "such a provider must force a sync before its effect": a provider marked external
// finds, while it runs, everything written before it durable — the call's deferred
// tool_called, the budget charge — so its effect never outlives the record of the
// call that caused it. The same provider without the mark finds none of it durable,
// which is what the mark is for.
func TestExternalProviderRunsAfterASync(t *testing.T) {
	for _, external := range []bool{true, false} {
		name := map[bool]string{true: "external", false: "store-only"}[external]
		t.Run(name, func(t *testing.T) {
			st, mem := crashable(t)
			r, _ := newRouter(t, RouterConfig{Store: st})
			var sawCalled bool
			var sawEvents int
			var sawBudget int64
			effect := provider{name: "test", external: external, run: func(ctx context.Context, c *call) (json.RawMessage, error) {
				// The effect would happen here; a crash now keeps what is synced.
				_, sawEvents, sawBudget = afterCrash(t, mem, c.caller.PID, "none", "syscalls")
				sawCalled = sawEvents >= 1
				return json.RawMessage(`{}`), nil
			}}
			rt := declare("test.effect", "An effect outside the store.", writes(CapKVWrite, ApprovalNone),
				`{"type":"object","additionalProperties":false}`, `{"type":"object"}`, effect).governedBy(nil, nil, SlotBudget)
			var err error
			if rt.argsSchema, err = compileSchema("test/args", rt.args); err != nil {
				t.Fatal(err)
			}
			if rt.resultSchema, err = compileSchema("test/result", rt.result); err != nil {
				t.Fatal(err)
			}
			r.routes = maps.Clone(r.routes)
			r.routes[rt.name] = &rt

			// The engine's order: tool_called deferred, then the handler's syscalls.
			err = st.UpdateDeferred(context.Background(), func(tx *store.Tx) error {
				_, err := tx.Append("p", store.EventToolCalled, json.RawMessage(`{"call_id":"c"}`))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			pol, probs := compilePolicy(PolicySpec{RouteBudgets: map[string]int64{BudgetAll: 5}}, r.routes, nil)
			if probs != nil {
				t.Fatal(probs)
			}
			c := Caller{PID: "p", Tool: "t", Capabilities: NewCapSet(CapKVWrite), Policy: pol, Deferred: true}
			if _, err := r.For(c).Syscall(context.Background(), "test.effect", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			if external && (!sawCalled || sawBudget != 1) {
				t.Fatalf("an external provider runs after a sync: tool_called durable=%v budget=%d", sawCalled, sawBudget)
			}
			if !external && (sawCalled || sawBudget != 0) {
				t.Fatalf("without the mark nothing is synced before the provider: tool_called durable=%v budget=%d", sawCalled, sawBudget)
			}
		})
	}
}

// Only routes that reach outside the store are external: the sync before a provider
// is only paid where it is needed. net.fetch sends to another host, which a crash does
// not undo, so its tool_called must be durable first.
func TestOnlyNetworkRoutesAreExternal(t *testing.T) {
	want := map[string]bool{"net.fetch": true}
	for _, r := range table {
		if r.provider.external != want[r.name] {
			t.Errorf("%s: external=%v; add it to this test's expectations with a reason", r.name, r.provider.external)
		}
		if (r.auth.effect == EffectExternal) != r.provider.external {
			t.Errorf("%s: effect class %s but provider external=%v: the class says what the router syncs", r.name, r.auth.effect, r.provider.external)
		}
	}
}
