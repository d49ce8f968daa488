package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// probe is a built-in test tool that makes two syscalls with its call's authority
// and lets the test act between them.
func probe(router **syscalls.Router, between func(call *engine.Call)) engine.Tool {
	return engine.Tool{
		Name: "probe", InputSchema: json.RawMessage(`{"type":"object","properties":{"route":{"type":"string"},"args":{"type":"object"}},"required":["route","args"]}`),
		Handler: func(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
			var in struct {
				Route string          `json:"route"`
				Args  json.RawMessage `json:"args"`
			}
			_ = json.Unmarshal(call.Args, &in)
			b := (*router).For(call.Syscalls)
			code := func() string {
				_, err := b.Syscall(ctx, in.Route, in.Args)
				var se *syscalls.Error
				if errors.As(err, &se) {
					return string(se.Code)
				}
				if err != nil {
					return err.Error()
				}
				return "ok"
			}
			first := code()
			if between != nil {
				between(call)
			}
			return json.Marshal(map[string]string{"first": first, "second": code()})
		},
	}
}

// TestGrantRevoke: "grant/revoke a capability (live: the capability set handed to
// syscalls.Caller must reflect revocation immediately — audit every decision)".
func TestGrantRevoke(t *testing.T) {
	var router *syscalls.Router
	var k **engine.Kernel
	revokeBetween := false
	tool := probe(&router, func(call *engine.Call) {
		if revokeBetween {
			if err := (*k).Revoke(context.Background(), call.PID, "clock:now"); err != nil {
				panic(err)
			}
		}
	})
	w := newWorld(t, engine.Config{Builtins: []engine.Tool{tool}}, syscalls.RouterConfig{})
	k = &w.k
	var err error
	if router, err = syscalls.NewRouter(syscalls.RouterConfig{Store: w.st}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pid, err := w.k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"probe"}})
	if err != nil {
		t.Fatal(err)
	}
	clock := `{"route":"clock.now","args":{"timezone":"UTC"}}`
	if got := w.mustCall(t, pid, "probe", clock); got["first"] != "capability_denied" {
		t.Fatalf("before grant: %v", got)
	}
	if err := w.k.Grant(ctx, pid, "clock:now"); err != nil {
		t.Fatal(err)
	}
	if got := w.mustCall(t, pid, "probe", clock); got["first"] != "ok" || got["second"] != "ok" {
		t.Fatalf("after grant: %v", got)
	}
	// Revocation reaches a call that is already running: its next syscall is denied.
	revokeBetween = true
	if got := w.mustCall(t, pid, "probe", clock); got["first"] != "ok" || got["second"] != "capability_denied" {
		t.Fatalf("revoked mid-call: %v", got)
	}
	revokeBetween = false
	evs := w.events(t, pid)
	if field(t, lastOf(t, evs, engine.EventCapabilityGranted), "capability") != "clock:now" ||
		field(t, lastOf(t, evs, engine.EventCapabilityRevoked), "capability") != "clock:now" {
		t.Fatal("grant and revoke are not audited")
	}
	// Every syscall decision is audited by the router, denials with their stage.
	denied := 0
	for _, e := range evs {
		if e.Type == syscalls.EventSyscall && field(t, e, "decision") == "denied" && field(t, e, "stage") == "capability" {
			denied++
		}
	}
	if denied != 3 { // two before the grant, one after the revocation
		t.Fatalf("%d audited capability denials, want 3", denied)
	}
	if err := w.k.Grant(ctx, pid, "clock:later"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("unknown capability granted: %v", err)
	}
	if err := w.k.Grant(ctx, pid, "kv:read"); err != nil {
		t.Fatal(err)
	}
	w.reopen(t)
	router, _ = syscalls.NewRouter(syscalls.RouterConfig{Store: w.st})
	if info, _ := w.k.Process(pid); !slices.Equal(info.Capabilities, []string{"kv:read"}) {
		t.Fatalf("after reopen the process holds %v, want [kv:read]", info.Capabilities)
	}
	if got := w.mustCall(t, pid, "probe", clock); got["first"] != "capability_denied" {
		t.Fatalf("revocation did not survive reopen: %v", got)
	}
}

// TestProcessOperations: "set the projection mode, pause/kill, list processes".
func TestProcessOperations(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	a := w.spawnImage(t, loadImage(t, "echo.yaml"))
	b := w.spawnImage(t, loadImage(t, "echo.yaml"))

	if err := w.k.SetProjection(ctx, a, engine.Multiplexed); err != nil {
		t.Fatal(err)
	}
	defs, _ := w.k.Tools(a)
	if !slices.ContainsFunc(defs, func(d render.Tool) bool { return d.Name == engine.RunJITTool }) {
		t.Fatal("multiplexed projection without run_jit_tool")
	}
	if err := w.k.SetProjection(ctx, a, "sideways"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("bad projection: %v", err)
	}

	if err := w.k.Pause(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(a, "echo", `{"x":1}`); !errors.Is(err, engine.ErrProcessPaused) {
		t.Fatalf("call on a paused process: %v", err)
	}
	if err := w.k.Pause(ctx, a); !errors.Is(err, engine.ErrInvalidState) {
		t.Fatalf("pausing twice: %v", err)
	}
	rej := lastOf(t, w.events(t, a), engine.EventCallRejected)
	if field(t, rej, "code") != "process_paused" {
		t.Fatalf("paused call not audited: %s", rej.Data)
	}
	w.reopen(t) // a paused process stays paused
	if _, err := w.call(a, "echo", `{}`); !errors.Is(err, engine.ErrProcessPaused) {
		t.Fatalf("pause did not survive reopen: %v", err)
	}
	if err := w.k.Resume(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(a, "echo", `{"x":1}`); err != nil {
		t.Fatal(err)
	}

	if err := w.k.Kill(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(b, "echo", `{}`); !errors.Is(err, engine.ErrUnknownProcess) {
		t.Fatalf("call on a killed process: %v", err)
	}
	list, err := w.k.ListProcesses()
	if err != nil || len(list) != 2 {
		t.Fatalf("ListProcesses = %v, %v", list, err)
	}
	states := map[string]string{}
	for _, p := range list {
		states[p.PID] = p.State + "/" + string(p.Projection) + "/" + p.Image
	}
	if states[a] != "running/multiplexed/echo-diagnostics" || states[b] != "killed/direct/echo-diagnostics" {
		t.Fatalf("states = %v", states)
	}
	w.reopen(t)
	if _, err := w.k.Process(b); !errors.Is(err, engine.ErrUnknownProcess) {
		t.Fatalf("a killed process came back: %v", err)
	}
	if info, err := w.k.Process(a); err != nil || info.Projection != engine.Multiplexed {
		t.Fatalf("projection did not survive reopen: %+v, %v", info, err)
	}
}

// TestCheckpointFork: "Checkpoint(pid) records a durable snapshot (capabilities, kv,
// bindings); Fork(checkpoint) creates a new process with a new PID and new identities
// — JIT bindings are re-created with new tool IDs under the new PID; candidates stay
// owned by the original PID."
func TestCheckpointFork(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	def, _ := tools.DefaultImage()
	parent := w.spawnImage(t, def)
	toolID := w.register(t, parent, doubler("double"))
	w.register(t, parent, noter("note"))
	w.mustCall(t, parent, "note", `{"key":"k1","value":"v1"}`)
	if err := w.k.Revoke(ctx, parent, "tools:call"); err != nil {
		t.Fatal(err)
	}

	ck, err := w.k.Checkpoint(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	w.mustCall(t, parent, "note", `{"key":"k2","value":"after the checkpoint"}`)

	child, err := w.k.Fork(ctx, ck)
	if err != nil {
		t.Fatal(err)
	}
	if child == parent || !strings.HasPrefix(child, "pid_") {
		t.Fatalf("fork PID %q", child)
	}
	info, _ := w.k.Process(child)
	if info.Parent != parent || info.Checkpoint != ck || slices.Contains(info.Capabilities, "tools:call") || len(info.Capabilities) != 3 {
		t.Fatalf("fork = %+v", info)
	}
	pb, _ := w.k.Bindings(parent)
	cb, _ := w.k.Bindings(child)
	if len(cb) != 2 || len(pb) != 2 {
		t.Fatalf("bindings: parent %v, child %v", pb, cb)
	}
	for i := range cb {
		if cb[i].Name != pb[i].Name || cb[i].ToolID == pb[i].ToolID || cb[i].CandidateID != pb[i].CandidateID ||
			cb[i].CandidatePID != parent || cb[i].PID != child {
			t.Fatalf("fork binding %+v of parent's %+v: want same name and candidate, new tool ID, candidate owned by the parent", cb[i], pb[i])
		}
	}
	if cs, _ := w.k.Candidates(child); len(cs) != 0 {
		t.Fatalf("the fork owns %d candidates; candidates stay with the original PID", len(cs))
	}
	if cs, _ := w.k.Candidates(parent); len(cs) != 2 {
		t.Fatalf("the parent owns %d candidates", len(cs))
	}
	// The re-created tools run, under the new PID, with the snapshot's kv.
	if got := w.mustCall(t, child, "double", `{"n":21}`); got["n"] != float64(42) {
		t.Fatalf("double in the fork: %v", got)
	}
	if v, err := w.st.KVGet(child, "k1"); err != nil || string(v) != `"v1"` {
		t.Fatalf("fork kv k1 = %s, %v", v, err)
	}
	if _, err := w.st.KVGet(child, "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a write after the checkpoint reached the fork: %v", err)
	}
	w.mustCall(t, child, "note", `{"key":"k3","value":"child only"}`)
	if _, err := w.st.KVGet(parent, "k3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the fork wrote into the parent's kv")
	}
	forked := lastOf(t, w.events(t, child), engine.EventProcessForked)
	if field(t, forked, "parent") != parent || field(t, forked, "checkpoint_id") != ck {
		t.Fatalf("process_forked = %s", forked.Data)
	}
	if field(t, lastOf(t, w.events(t, parent), engine.EventCheckpointForked), "child") != child {
		t.Fatal("no checkpoint_forked in the parent's log")
	}
	defs, _ := w.k.Tools(child)
	for _, d := range defs {
		if d.Name == "double" && string(d.InputSchema) != `{"additionalProperties":false,"properties":{"n":{"maximum":1000,"type":"integer"}},"required":["n"],"type":"object"}` {
			t.Fatalf("fork's schema = %s", d.InputSchema)
		}
	}

	// A fork of a fork still points at the original candidates, and a killed
	// parent's checkpoint can still be forked.
	ck2, err := w.k.Checkpoint(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.k.Kill(ctx, child); err != nil {
		t.Fatal(err)
	}
	grand, err := w.k.Fork(ctx, ck2)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := w.k.Bindings(grand)
	if len(gb) != 2 || gb[0].CandidatePID != parent || gb[0].ToolID == cb[0].ToolID {
		t.Fatalf("grandchild bindings %+v", gb)
	}
	if _, err := w.k.Fork(ctx, "ckpt_00000000000000000000000000000000"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown checkpoint: %v", err)
	}
	// Forked bindings rehydrate like any other.
	w.reopen(t)
	if got := w.mustCall(t, grand, "double", `{"n":5}`); got["n"] != float64(10) {
		t.Fatalf("grandchild after reopen: %v", got)
	}
	if got := w.mustCall(t, parent, "double", `{"n":1}`); got["n"] != float64(2) {
		t.Fatalf("parent after reopen: %v", got)
	}
	if b, _ := w.k.Bindings(parent); b[0].ToolID != toolID && b[1].ToolID != toolID {
		t.Fatal("the parent's tool ID changed")
	}
}
