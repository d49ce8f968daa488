package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// writer is a built-in that behaves like a JIT tool: its only effects are kv.put
// syscalls made with its call's authority through the real router. It writes
// "<tag>/<i>" for i < n, then fails when asked to (the writes stay: an error after
// syscalls does not roll them back). With sync it syncs the store after its writes,
// as another call's settlement would, so that a crash finds the call durable but open.
func writer(router *syscalls.Router, st *store.Store) engine.Tool {
	return engine.Tool{
		Name: "writer",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tag":{"type":"string"},"n":{"type":"integer"},"fail":{"type":"boolean"},"sync":{"type":"boolean"}},` +
			`"required":["tag","n","fail","sync"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
			var in struct {
				Tag  string `json:"tag"`
				N    int    `json:"n"`
				Fail bool   `json:"fail"`
				Sync bool   `json:"sync"`
			}
			if err := json.Unmarshal(call.Args, &in); err != nil {
				return nil, err
			}
			b := router.For(call.Syscalls)
			for i := 0; i < in.N; i++ {
				args, _ := json.Marshal(map[string]any{"key": fmt.Sprintf("%s/%d", in.Tag, i), "value": i})
				if _, err := b.Syscall(ctx, "kv.put", args); err != nil {
					return nil, err
				}
			}
			if in.Sync {
				if err := st.Sync(ctx); err != nil {
					return nil, err
				}
			}
			if in.Fail {
				return nil, codedErr{"capability_denied"}
			}
			return json.Marshal(map[string]any{"tag": in.Tag, "n": in.N})
		},
	}
}

// pipelineCall is one call of the crash workload.
type pipelineCall struct {
	tag        string
	n          int
	fail, sync bool
}

// crashPoint is what a crash at one write operation would leave: the file system and
// the calls whose settlement had been acknowledged (returned) by then.
type pipelineCrash struct {
	fs    *vfs.MemFS
	acked map[string]pipelineCall
}

// openKernel opens a store and a kernel on fs with the writer tool.
func openKernel(t *testing.T, fs vfs.FS) (*store.Store, *engine.Kernel) {
	t.Helper()
	st, err := store.Open("/data", store.Options{FS: fs})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	r, err := syscalls.NewRouter(syscalls.RouterConfig{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{writer(r, st)}})
	if err != nil {
		st.Close()
		t.Fatalf("open kernel: %v", err)
	}
	return st, k
}

// The invariant behind "unknown settlement" with a deferred tool_called: "every
// acknowledged call's events and effects are present; any surviving kv effect has its
// tool_called; after reopen, unsettled calls are reported as unknown settlement". A
// workload of calls that make kv.put syscalls (some then fail) runs through the whole
// pipeline on a crashable file system, which is cloned at every write operation; each
// clone is checked with the store alone and then reopened by a kernel.
func TestCrashThroughThePipeline(t *testing.T) {
	calls := 48
	if testing.Short() || raceEnabled {
		calls = 16
	}
	for _, pct := range []int{0, 50} {
		t.Run(fmt.Sprintf("unsynced=%d%%", pct), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			rng := rand.New(rand.NewPCG(uint64(pct), 7))
			var (
				mu     sync.Mutex
				acked  = map[string]pipelineCall{}
				points []pipelineCrash
				writes atomic.Int64
				armed  atomic.Bool
			)
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
					return nil
				}
				writes.Add(1)
				mu.Lock()
				defer mu.Unlock()
				cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: pct}
				if pct > 0 {
					cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), 8))
				}
				snap := make(map[string]pipelineCall, len(acked))
				for tag, c := range acked {
					snap[tag] = c
				}
				points = append(points, pipelineCrash{fs: mem.CrashClone(cfg), acked: snap})
				return nil
			}))
			st, kern := openKernel(t, fs)
			pid, err := kern.Spawn(context.Background(), engine.ProcessConfig{Capabilities: []string{"kv:write"}, Tools: []string{"writer"}})
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			var wg sync.WaitGroup
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < calls; i += 2 {
						c := pipelineCall{tag: fmt.Sprintf("c%02d", i), n: i % 3, fail: i%4 == 3, sync: i%5 == 1}
						frame, _ := json.Marshal(map[string]any{"name": "writer", "arguments": map[string]any{"tag": c.tag, "n": c.n, "fail": c.fail, "sync": c.sync}})
						_, err := kern.HandleFrame(context.Background(), pid, frame)
						if c.fail != (err != nil) || c.fail && codeOf(err) != "capability_denied" {
							t.Errorf("call %s: %v", c.tag, err)
							return
						}
						// Returned, with a result or the tool's error: the model has
						// been acknowledged.
						mu.Lock()
						acked[c.tag] = c
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			armed.Store(false)
			kern.Close()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			unknown := 0
			for _, p := range points {
				unknown += checkPipelineCrash(t, p, pid, calls)
			}
			// Each call's settlement is synced; concurrent ones may share a write.
			if len(points) < calls/2 {
				t.Fatalf("only %d crash points (%d write operations) for %d calls", len(points), writes.Load(), calls)
			}
			if unknown == 0 {
				t.Fatalf("no crash point left a call open: the workload never crashed inside a call")
			}
			t.Logf("%d crash points; %d open calls reported as unknown settlement in all", len(points), unknown)
		})
	}
}

// checkPipelineCrash checks one crash point and returns how many calls the reopened
// kernel reported as unknown settlement.
func checkPipelineCrash(t *testing.T, p pipelineCrash, pid string, calls int) int {
	t.Helper()
	st, err := store.Open("/data", store.Options{FS: p.fs})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	if _, err := st.Process(pid); errors.Is(err, store.ErrNotFound) {
		st.Close()
		return 0 // the crash came before the process was spawned
	}
	if err := st.Verify(pid); err != nil {
		t.Fatalf("after crash: %v", err)
	}
	evs, err := st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		callID            string
		called, settled   bool
		result, failed    bool
		audited           map[string]bool // kv keys with an allowed syscall event
		unknownSettlement bool
	}
	byTag := map[string]*seen{}
	byID := map[string]*seen{}
	tagOf := func(ev store.Event) string {
		var d struct {
			Args struct {
				Tag string `json:"tag"`
			} `json:"args"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		return d.Args.Tag
	}
	for _, ev := range evs {
		switch ev.Type {
		case engine.EventToolCalled:
			s := &seen{callID: ev.CallID, called: true, audited: map[string]bool{}}
			byTag[tagOf(ev)], byID[ev.CallID] = s, s
		case engine.EventToolResult, engine.EventToolFailed:
			s := byID[ev.CallID]
			if s == nil {
				t.Fatalf("a settlement of %s survived without its tool_called", ev.CallID)
			}
			s.settled, s.result, s.failed = true, ev.Type == engine.EventToolResult, ev.Type == engine.EventToolFailed
		case syscalls.EventSyscall:
			var d struct {
				Decision string `json:"decision"`
				Args     struct {
					Key string `json:"key"`
				} `json:"args"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			tag, _, _ := strings.Cut(d.Args.Key, "/")
			s := byTag[tag]
			if s == nil || s.settled {
				t.Fatalf("a syscall event for %s survived outside its call (tool_called present: %v)", d.Args.Key, s != nil)
			}
			if d.Decision == "allowed" {
				s.audited[d.Args.Key] = true
			}
		}
	}
	// Every kv effect that survived has its audit event and its call's tool_called.
	keys, _, err := st.KVList(pid, "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range keys {
		tag, _, _ := strings.Cut(kv.Key, "/")
		s := byTag[tag]
		if s == nil {
			t.Fatalf("kv effect %s survived without the tool_called of its call", kv.Key)
		}
		if !s.audited[kv.Key] {
			t.Fatalf("kv effect %s survived without its audit event", kv.Key)
		}
	}
	// Every acknowledged call is there whole: tool_called, its effects with their
	// audit events, its settlement and, for a result, the ToolResult.
	for tag, c := range p.acked {
		s := byTag[tag]
		if s == nil || !s.settled || s.failed != c.fail {
			t.Fatalf("acknowledged call %s lost or unsettled after the crash (%+v)", tag, s)
		}
		for i := 0; i < c.n; i++ {
			key := fmt.Sprintf("%s/%d", tag, i)
			if _, err := st.KVGet(pid, key); err != nil || !s.audited[key] {
				t.Fatalf("acknowledged call %s lost its effect %s (audited %v): %v", tag, key, s.audited[key], err)
			}
		}
		if !c.fail {
			if _, err := st.ToolResult(pid, s.callID); err != nil {
				t.Fatalf("acknowledged call %s lost its ToolResult: %v", tag, err)
			}
		}
	}
	open := map[string]bool{}
	for _, s := range byID {
		if !s.settled {
			open[s.callID] = true
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the kernel reports exactly the open calls as unknown settlement, and
	// settles them so that they are reported once.
	st, k := openKernel(t, p.fs)
	defer st.Close()
	defer k.Close()
	got := k.UnknownSettlements()
	if len(got) != len(open) {
		t.Fatalf("unknown settlements %d, open calls %d", len(got), len(open))
	}
	for _, u := range got {
		if !open[u.CallID] || u.Tool != "writer" || u.PID != pid {
			t.Fatalf("unknown settlement %+v is not an open call", u)
		}
	}
	if left, err := st.Unsettled(pid); err != nil || len(left) != 0 {
		t.Fatalf("after reopen no call is left open: %d, %v", len(left), err)
	}
	return len(got)
}

// "tool_called … deferred; the settlement stays synced": while a handler runs, a crash
// keeps nothing of its call (tool_called waits for the settlement's sync), except for
// a tool that talks to the world outside the libOS (Annotations.OpenWorld), whose
// tool_called is synced before its handler runs. After the call returns, both are
// durable.
func TestToolCalledIsDeferredUnlessOpenWorld(t *testing.T) {
	for _, openWorld := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed-world", true: "open-world"}[openWorld], func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			durableCalled := func() int {
				st, err := store.Open("/data", store.Options{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				procs, err := st.Processes()
				if err != nil || len(procs) != 1 {
					t.Fatalf("processes: %v %v", procs, err)
				}
				evs, err := st.Events(procs[0].PID, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				return countType(evs, engine.EventToolCalled)
			}
			var during int
			tool := builtin("effect", `{"type":"object"}`, "", func(context.Context, *engine.Call) (json.RawMessage, error) {
				during = durableCalled() // a crash now
				return json.RawMessage(`{}`), nil
			})
			tool.Annotations.OpenWorld = openWorld
			st, err := store.Open("/data", store.Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			k, err := engine.Open(context.Background(), st, engine.Config{Builtins: []engine.Tool{tool}})
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			pid, err := k.Spawn(context.Background(), engine.ProcessConfig{Tools: []string{"effect"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := k.HandleFrame(context.Background(), pid, []byte(`{"name":"effect","arguments":{}}`)); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 0, true: 1}[openWorld]; during != want {
				t.Fatalf("tool_called durable while the handler ran: %d, want %d", during, want)
			}
			if after := durableCalled(); after != 1 {
				t.Fatalf("after the call returned, tool_called durable: %d, want 1", after)
			}
		})
	}
}
