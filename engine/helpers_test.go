package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

type env struct {
	t  *testing.T
	st *store.Store
	k  *engine.Kernel
}

func newEnv(t testing.TB, cfg engine.Config) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Builtins == nil {
		cfg.Builtins = []engine.Tool{tools.Echo()}
	}
	k, err := engine.Open(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Close()
		st.Close()
	})
	return &env{st: st, k: k}
}

func (e *env) spawn(t testing.TB, cfg engine.ProcessConfig) string {
	t.Helper()
	pid, err := e.k.Spawn(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func (e *env) events(t testing.TB, pid string) []store.Event {
	t.Helper()
	evs, err := e.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Verify(pid); err != nil {
		t.Fatalf("event chain does not verify: %v", err)
	}
	return evs
}

func types(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func field(t testing.TB, ev store.Event, name string) any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(ev.Data))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

func codeOf(err error) string {
	var e *engine.Error
	if errors.As(err, &e) {
		return string(e.Code)
	}
	if err == nil {
		return ""
	}
	return "untyped: " + err.Error()
}
