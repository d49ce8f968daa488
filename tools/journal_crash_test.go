package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// crashSource reads the clock, writes what it read, and reads the clock again: the
// second read is a moment after the first syscall's provider returned and its journal
// entry was written, before the call settles.
const crashSource = `export async function run(args: { n: number }, libos: any) {
  const a = await libos.syscall("clock.now", { timezone: "UTC" });
  await libos.syscall("kv.put", { key: "t", value: String(a.iso8601) });
  const b = await libos.syscall("clock.now", { timezone: "UTC" });
  return { a: String(a.iso8601), b: String(b.iso8601) };
}`

// openKernel opens a kernel with the JIT lifecycle on st, with router's clock.
func openKernel(t *testing.T, st *store.Store, clock syscalls.Clock) (*engine.Kernel, *tools.JIT) {
	t.Helper()
	r, err := syscalls.NewRouter(syscalls.RouterConfig{Store: st, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	jit, err := tools.NewJIT(tools.Config{Store: st, Sandbox: sandbox(t), Router: r})
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.Open(context.Background(), st, engine.Config{Builtins: append([]engine.Tool{tools.Echo()}, jit.Tools()...), JIT: jit})
	if err != nil {
		t.Fatal(err)
	}
	return k, jit
}

// Crash tests: "a crash between the syscall's provider and the call's settlement
// never leaves a journal entry that claims a result the provider did not return". The
// store is cloned as a crash would leave it at every provider run of a call (with none,
// half or all of the unsynced writes surviving), reopened, and its journal compared
// with what the providers returned: every surviving entry is exactly one the live
// call wrote, named by its hash-chained audit event, the call is unsettled (reported
// as unknown settlement, refused for export) or absent, and nothing else.
func TestCrashBetweenProviderAndSettlement(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	st, err := store.Open("/libos", store.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	type crash struct {
		fs      *vfs.MemFS
		percent int
	}
	var (
		mu      sync.Mutex
		armed   bool
		crashes []crash
		tick    int
	)
	rng := rand.New(rand.NewPCG(1, 2))
	clock := syscalls.ClockFunc(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			for _, p := range []int{0, 50, 100} {
				crashes = append(crashes, crash{mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: p, RNG: rng}), p})
			}
			// As an external provider does before its effect: what the call wrote so
			// far is made durable, then the crash comes.
			if err := st.Sync(ctx); err != nil {
				t.Error(err)
			}
			crashes = append(crashes, crash{mem.CrashClone(vfs.CrashCloneCfg{}), -1})
		}
		tick++
		return time.Date(2026, 3, 4, 5, 6, tick, 0, time.UTC)
	})
	k, _ := openKernel(t, st, clock)
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Capabilities: []string{"clock:now", "kv:read", "kv:write"}, Tools: lifecycle})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{st: st, k: k}
	cand := withField(t, withField(t, replayCandidate(t, "clock_visits"), "source_code", jsonString(crashSource)), "input_schema",
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)
	cand = withField(t, cand, "output_schema", `{"type":"object"}`)
	cand = withField(t, cand, "name", `"crashy"`)
	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, cand)))
	mu.Lock()
	armed = true
	mu.Unlock()
	call, err := w.callID(t, pid, "crashy", `{"n":1}`)
	if err != nil {
		t.Fatal(err)
	}
	live, err := st.Journal(pid, call)
	if err != nil || len(live) != 3 {
		t.Fatalf("the live call journals 3 syscalls: %v %v", live, err)
	}
	k.Close()
	st.Close()
	if len(crashes) != 8 {
		t.Fatalf("%d crash points, want 8", len(crashes))
	}

	sawEntries := false
	for i, c := range crashes {
		cst, err := store.Open("/libos", store.Options{FS: c.fs})
		if err != nil {
			t.Fatalf("crash %d: reopen: %v", i, err)
		}
		if err := cst.Verify(pid); err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		js, err := cst.Journal(pid, call)
		if err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		// The crash came during the provider of clock read i/3 (0 or 1): the entries
		// of the syscalls before it may survive, never the one in progress or later.
		during := i / 4 * 2 // index of the syscall whose provider was running
		if len(js) > during {
			t.Fatalf("crash %d (during syscall %d, %d%% unsynced kept, -1: after a sync): %d journal entries survive, more than the providers had returned",
				i, during, c.percent, len(js))
		}
		evs, err := cst.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type != syscalls.EventSyscall || e.CallID != call {
				continue
			}
			var d struct {
				Journal struct {
					Index  int    `json:"index"`
					SHA256 string `json:"sha256"`
				} `json:"journal"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if n >= len(js) || d.Journal.Index != n || d.Journal.SHA256 != js[n].Digest {
				t.Fatalf("crash %d: syscall event %d does not name a surviving journal entry", i, e.Seq)
			}
			n++
		}
		for j, e := range js {
			if e.Digest != live[j].Digest || !bytes.Equal(e.Result, live[j].Result) {
				t.Fatalf("crash %d: journal entry %d claims %s; the provider returned %s", i, j, e.Result, live[j].Result)
			}
		}
		sawEntries = sawEntries || len(js) > 0
		if n != len(js) {
			t.Fatalf("crash %d: %d entries, %d audit events", i, len(js), n)
		}
		// Reopened, the kernel settles the open call as unknown; it is never exported.
		k, _ := openKernel(t, cst, syscalls.ClockFunc(time.Now))
		_, err = tools.ExportTape(cst, pid, call)
		if !codeIs(err, tools.CodeCallUnsettled) && !codeIs(err, tools.CodeCallNotFound) {
			t.Fatalf("crash %d: export of a call the crash interrupted: %v", i, err)
		}
		k.Close()
		cst.Close()
	}
	if !sawEntries {
		t.Fatal("no crash point left a journal entry behind: the test would check nothing")
	}
}
