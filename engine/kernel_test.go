package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// TestConcurrentProcesses: the kernel is "safe for concurrent calls on many
// processes"; every call settles and every log verifies.
func TestConcurrentProcesses(t *testing.T) {
	e := newEnv(t, engine.Config{Limits: engine.Limits{MaxCalls: 15}})
	const procs, calls = 4, 20
	pids := make([]string, procs)
	for i := range pids {
		pids[i] = e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for _, pid := range pids {
		for j := 0; j < calls; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				frame := fmt.Sprintf(`{"name":"echo","input":{"j":%d}}`, j)
				if j%5 == 0 {
					frame = `{"name":"echo","arguments":"[]"}`
				}
				r, err := e.k.HandleFrame(context.Background(), pid, []byte(frame))
				mu.Lock()
				codes[codeOf(err)]++
				mu.Unlock()
				if err == nil && string(r.Structured) != fmt.Sprintf(`{"j":%d}`, j) {
					t.Errorf("crossed results: %s for j=%d", r.Structured, j)
				}
			}()
		}
	}
	wg.Wait()
	// Per process: 4 protocol failures, 16 valid calls of which the budget admits 15.
	if codes[""] != procs*15 || codes["budget_exceeded"] != procs || codes["protocol_frame"] != procs*4 {
		t.Fatalf("outcomes %v", codes)
	}
	for _, pid := range pids {
		evs := e.events(t, pid)
		n := map[string]int{}
		for _, ev := range evs {
			n[ev.Type]++
		}
		if n["tool_called"] != 15 || n["tool_result"] != 15 || n["protocol_rejected"] != 4 || n["call_rejected"] != 1 {
			t.Fatalf("events of %s: %v", pid, n)
		}
		if b, _ := e.st.Budget(pid, "tool_calls"); b.Used != 15 {
			t.Fatalf("budget used %d", b.Used)
		}
	}
}

// TestRehydrate: reopening the store restores processes and their tool tables; "a
// call whose tool_called event exists but has no settlement after a crash is reported
// as unknown settlement on rehydrate, never silently retried".
func TestRehydrate(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}, Limits: engine.Limits{MaxCalls: 2}})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}, Projection: engine.Multiplexed, Capabilities: []string{"clock:now"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	// A call the kernel opened and never settled, as a crash would leave it.
	if _, err := st.Append(ctx, pid, engine.EventToolCalled, json.RawMessage(`{"call_id":"call_lost","tool":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if _, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo"}`)); codeOf(err) != "kernel_closed" {
		t.Fatalf("closed kernel: %v", err)
	}
	st.Close()

	st, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err = engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}, Limits: engine.Limits{MaxCalls: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	un := k.UnknownSettlements()
	if len(un) != 1 || un[0].CallID != "call_lost" || un[0].PID != pid || un[0].Tool != "echo" {
		t.Fatalf("unknown settlements %+v", un)
	}
	if open, _ := st.Unsettled(pid); len(open) != 0 {
		t.Fatalf("still unsettled after rehydrate: %v", open)
	}
	info, err := k.Process(pid)
	if err != nil || info.Projection != engine.Multiplexed || info.Tools["echo"] != engine.KindBuiltin || info.Capabilities[0] != "clock:now" {
		t.Fatalf("restored process %+v %v", info, err)
	}
	// The durable budget carries over: one call used before, one left.
	if _, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo"}`)); codeOf(err) != "budget_exceeded" {
		t.Fatalf("budget after reopen: %v", err)
	}
	evs, _ := st.Events(pid, 0, 0)
	got := strings.Join(types(evs), ",")
	if got != "process_spawned,tool_called,tool_result,tool_called,unknown_settlement,tool_called,tool_result,call_rejected" {
		t.Fatalf("events %s", got)
	}
	if err := st.Verify(pid); err != nil {
		t.Fatal(err)
	}
	// A second reopen reports nothing new: the lost call was settled, not retried.
	k.Close()
	k2, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if len(k2.UnknownSettlements()) != 0 {
		t.Fatalf("reported twice: %+v", k2.UnknownSettlements())
	}
}
