package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// fanOut is a tool that calls echo through the host API n times under its own call's
// context, as a JIT tool's tools.call syscalls do: one model call that fans out.
func fanOut(k **engine.Kernel, n int) engine.Tool {
	return engine.Tool{
		Name: "fan_out", Description: "Calls echo many times.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, c *engine.Call) (json.RawMessage, error) {
			for i := 0; i < n; i++ {
				if _, err := (*k).Runtime().Tools.CallTool(ctx, c.PID, "echo", json.RawMessage(`{"i":1}`), 1); err != nil {
					return nil, err
				}
			}
			return json.RawMessage(`{}`), nil
		},
	}
}

// TestAmplificationBounded: "per-process bounds on events per call and on store growth
// per process, typed errors when exceeded". One call fanning out through nested calls
// stops at its event quota with limit_exceeded, settled, with the log grown by at most
// the quota; the next call has its own quota; a process whose log reaches its limit is
// refused with limit_exceeded, and its log does not grow past it.
func TestAmplificationBounded(t *testing.T) {
	var k *engine.Kernel
	e := newEnv(t, engine.Config{Builtins: []engine.Tool{tools.Echo(), fanOut(&k, 100000)},
		Limits: engine.Limits{MaxCallEvents: 200}})
	k = e.k
	ctx := context.Background()
	pid := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo", "fan_out"}})
	before := len(e.events(t, pid))
	_, err := e.k.HandleFrame(ctx, pid, []byte(`{"name":"fan_out","arguments":{}}`))
	if codeOf(err) != "limit_exceeded" {
		t.Fatalf("a call fanning out 100,000 nested calls: %v, want limit_exceeded", err)
	}
	evs := e.events(t, pid)
	grown := len(evs) - before
	t.Logf("amplification: a call fanning out 100,000 nested calls appended %d events under a quota of 200", grown)
	if grown > 200+2 {
		t.Fatalf("the call appended %d events; its quota is 200 (and its own settlement)", grown)
	}
	if last := evs[len(evs)-1]; last.Type != "tool_failed" || field(t, last, "code") != "limit_exceeded" {
		t.Fatalf("the call is not settled as limit_exceeded: %s %s", last.Type, last.Data)
	}
	// The next call has a quota of its own.
	if _, err := e.k.HandleFrame(ctx, pid, []byte(`{"name":"echo","arguments":{"a":1}}`)); err != nil {
		t.Fatalf("the next call: %v", err)
	}

	// The log of a process is bounded: once it holds MaxLogEvents, calls are refused.
	small := e.spawn(t, engine.ProcessConfig{Tools: []string{"echo"}, Limits: engine.Limits{MaxLogEvents: 30}})
	refused := 0
	for i := 0; i < 40; i++ {
		_, err := e.k.HandleFrame(ctx, small, []byte(`{"name":"echo","arguments":{}}`))
		switch codeOf(err) {
		case "":
		case "limit_exceeded":
			refused++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if refused == 0 {
		t.Fatal("no call was refused")
	}
	n := len(e.events(t, small))
	t.Logf("amplification: 40 calls on a log bounded at 30 events: %d refused with limit_exceeded, log at %d events", refused, n)
	if n > 30+1 {
		t.Fatalf("the log grew to %d events past its limit of 30", n)
	}
}

// TestLogBytesBoundSurvivesRestart: "per-process bounds … on store growth per
// process, typed when exceeded". A process whose log holds its max_log_bytes of event
// data is refused with limit_exceeded, its log does not grow past the bound (but for
// the settlement of the call that reached it), and the bound still holds after the
// store and kernel are closed and opened again: the count is kept in the store.
func TestLogBytesBoundSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() (*store.Store, *engine.Kernel) {
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
		if err != nil {
			t.Fatal(err)
		}
		return st, k
	}
	st, k := open()
	const bound = 8 << 10
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}, Limits: engine.Limits{MaxLogBytes: bound}})
	if err != nil {
		t.Fatal(err)
	}
	frame := []byte(`{"name":"echo","arguments":{"pad":"` + strings.Repeat("x", 500) + `"}}`)
	logBytes := func() (n int) {
		evs, err := st.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			n += len(e.Data)
		}
		return n
	}
	refusedAt := -1
	for i := 0; i < 100 && refusedAt < 0; i++ {
		_, err := k.HandleFrame(ctx, pid, frame)
		switch codeOf(err) {
		case "":
		case "limit_exceeded":
			refusedAt = i
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if refusedAt < 0 {
		t.Fatal("100 calls of 500 bytes each never reached a bound of 8 KiB")
	}
	grown := logBytes()
	t.Logf("log bytes bound: refused at call %d, log holds %d bytes of event data under a bound of %d", refusedAt, grown, bound)
	if grown > bound+1024 {
		t.Fatalf("the log holds %d bytes; its bound is %d (and one settlement)", grown, bound)
	}
	k.Close()
	st.Close()

	st, k = open()
	defer func() { k.Close(); st.Close() }()
	if _, err := k.HandleFrame(ctx, pid, frame); codeOf(err) != "limit_exceeded" {
		t.Fatalf("after a restart, a call on a full log: %v, want limit_exceeded", err)
	}
	if after := logBytes(); after > bound+1024 {
		t.Fatalf("after a restart the log grew to %d bytes", after)
	}
	if h, err := st.Head(pid); err != nil || h.Bytes == 0 || int(h.Bytes) != logBytes() {
		t.Fatalf("head %+v (%v): its byte count is not the log's %d bytes", h, err, logBytes())
	}
}
