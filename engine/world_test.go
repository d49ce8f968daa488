package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

var (
	sandboxOnce sync.Once
	sandboxEng  *wasm.Engine
	sandboxErr  error
)

func sandbox(t testing.TB) *wasm.Engine {
	t.Helper()
	sandboxOnce.Do(func() { sandboxEng, sandboxErr = wasm.NewEngine(context.Background(), wasm.Config{}) })
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandboxEng
}

// world is the whole stack on a real Pebble directory: the kernel with the JIT
// lifecycle as its JIT loader (rehydrate and fork), the real QuickJS sandbox and the
// real syscall router, JIT syscalls running with the call's live authority.
type world struct {
	dir    string
	st     *store.Store
	k      *engine.Kernel
	jit    *tools.JIT
	cfg    engine.Config
	router syscalls.RouterConfig
	// readOnly opens the store read-only (store.Options.ReadOnly).
	readOnly bool
}

func newWorld(t testing.TB, cfg engine.Config, rc syscalls.RouterConfig) *world {
	w := &world{dir: t.TempDir(), cfg: cfg, router: rc}
	w.open(t)
	t.Cleanup(w.close)
	return w
}

// open (re)opens the store and the kernel on w.dir.
func (w *world) open(t testing.TB) {
	t.Helper()
	st, err := store.Open(w.dir, store.Options{ReadOnly: w.readOnly})
	if err != nil {
		t.Fatal(err)
	}
	rc := w.router
	rc.Store = st
	r, err := syscalls.NewRouter(rc)
	if err != nil {
		t.Fatal(err)
	}
	jit, err := tools.NewJIT(tools.Config{Store: st, Sandbox: sandbox(t), Router: r,
		Authority: func(c *engine.Call) syscalls.Caller { return c.Syscalls }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := w.cfg
	cfg.Builtins = append(append([]engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}, jit.Tools()...), cfg.Builtins...)
	cfg.JIT = jit
	k, err := engine.Open(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.st, w.k, w.jit = st, k, jit
}

func (w *world) close() {
	if w.k != nil {
		w.k.Close()
		w.st.Close()
		w.k = nil
	}
}

func (w *world) reopen(t testing.TB) {
	t.Helper()
	w.close()
	w.open(t)
}

func (w *world) spawnImage(t testing.TB, img *image.Image) string {
	t.Helper()
	pid, err := w.k.SpawnImage(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// call sends one model frame {"name", "arguments"}.
func (w *world) call(pid, name, args string) (json.RawMessage, error) {
	frame, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	res, err := w.k.HandleFrame(context.Background(), pid, frame)
	if err != nil {
		return nil, err
	}
	return res.Structured, nil
}

func (w *world) mustCall(t testing.TB, pid, name, args string) map[string]any {
	t.Helper()
	out, err := w.call(pid, name, args)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (w *world) events(t testing.TB, pid string) []store.Event {
	t.Helper()
	evs, err := w.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.k.VerifyLog(pid); err != nil {
		t.Fatal(err)
	}
	return evs
}

func countType(evs []store.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func lastOf(t testing.TB, evs []store.Event, typ string) store.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s event in %v", typ, types(evs))
	return store.Event{}
}

// candidate is a propose_jit_tool argument object.
func candidate(name, src, in, out, tests string) string {
	b, _ := json.Marshal(map[string]any{"name": name, "description": "test tool " + name, "source_code": src,
		"input_schema": json.RawMessage(in), "output_schema": json.RawMessage(out), "tests": json.RawMessage(tests)})
	return string(b)
}

// doubler is a pure JIT tool: {"n": integer} → {"n": 2n}.
func doubler(name string) string {
	return candidate(name, `export function run(args) { return {n: args.n * 2}; }`,
		`{"type":"object","properties":{"n":{"type":"integer","maximum":1000}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`,
		`[{"args":{"n":2},"expected":{"n":4},"syscalls":[]}]`)
}

// noter is a JIT tool that writes kv: {"key","value"} → {"stored": key}.
func noter(name string) string {
	return candidate(name, `export async function run(args, libos) {
  await libos.syscall("kv.put", {key: args.key, value: args.value});
  return {stored: args.key};
}`,
		`{"type":"object","properties":{"key":{"type":"string","maxLength":64},"value":{"type":"string","maxLength":64}},"required":["key","value"],"additionalProperties":false}`,
		`{"type":"object","properties":{"stored":{"type":"string"}},"required":["stored"],"additionalProperties":false}`,
		`[{"args":{"key":"a","value":"b"},"expected":{"stored":"a"},"syscalls":[{"name":"kv.put","args":{"key":"a","value":"b"},"result":{}}]}]`)
}

// register proposes, validates and registers a candidate through model calls and
// returns the tool ID.
func (w *world) register(t testing.TB, pid, cand string) string {
	t.Helper()
	id := w.mustCall(t, pid, tools.ProposeName, cand)["candidate_id"].(string)
	if rep := w.mustCall(t, pid, tools.ValidateName, `{"candidate_id":"`+id+`"}`); rep["ok"] != true {
		t.Fatalf("validation failed: %v", rep)
	}
	reg := w.mustCall(t, pid, tools.RegisterName, `{"candidate_id":"`+id+`"}`)
	return reg["tool_id"].(string)
}

// waitPending waits until pid has n pending approvals and returns them.
func (w *world) waitPending(t testing.TB, n int) []engine.Approval {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		as, err := w.k.PendingApprovals()
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == n {
			return as
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never saw %d pending approvals", n)
	return nil
}
