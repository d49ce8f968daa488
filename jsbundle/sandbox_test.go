package jsbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/wasm"
)

// clockProvider answers clock.now as the JIT authoring Skill's tape does: it stands in for the syscall
// provider, not for the sandbox, and records what the guest asked.
type clockProvider struct {
	mu    sync.Mutex
	calls []string
}

func (p *clockProvider) Syscall(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls = append(p.calls, name+" "+string(args))
	p.mu.Unlock()
	if name != "clock.now" {
		return nil, fmt.Errorf("unexpected syscall %q", name)
	}
	var a struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Timezone != "UTC" {
		return nil, fmt.Errorf("unexpected clock.now args %s", args)
	}
	return json.RawMessage(`{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}`), nil
}

func sandboxEngine(t *testing.T) *wasm.Engine {
	t.Helper()
	e, err := wasm.NewEngine(context.Background(), wasm.Config{CacheDir: filepath.Join(os.TempDir(), "libos-jsbundle-test-cache")})
	if err != nil {
		t.Fatalf("wasm.NewEngine: %v", err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func sandboxRun(t *testing.T, e *wasm.Engine, prog *Program, args string, sys wasm.Syscaller) (*wasm.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.Run(ctx, prog.Source, json.RawMessage(args), sys, wasm.Options{Seed: 1})
}

// The JIT authoring Skill's clock example compiles, and the program it produces runs in the sandbox and
// returns the expected value.
func TestSandboxClockExample(t *testing.T) {
	const seed = `export async function run(args: { timezone: string }, libos: any) {
  const observed = await libos.syscall("clock.now", {timezone: args.timezone});
  return {iso8601: String(observed.iso8601), timezone: String(observed.timezone)};
}
`
	prog, diags := Compile(seed, Options{})
	if prog == nil || len(diags) != 0 {
		t.Fatalf("clock example rejected: %+v", diags)
	}
	p := &clockProvider{}
	res, err := sandboxRun(t, sandboxEngine(t), prog, `{"timezone":"UTC"}`, p)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	const want = `{"iso8601":"2026-01-02T03:04:05+00:00","timezone":"UTC"}`
	var got, exp any
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	json.Unmarshal([]byte(want), &exp)
	if gb, _ := json.Marshal(got); !bytes.Equal(gb, []byte(want)) {
		t.Errorf("value = %s, want %s (%v)", res.Value, want, exp)
	}
	if len(p.calls) != 1 || p.calls[0] != `clock.now {"timezone":"UTC"}` {
		t.Errorf("syscalls = %q, want one clock.now {\"timezone\":\"UTC\"}", p.calls)
	}
}

// Every program accepted by the datadriven cases is a script QuickJS 2021 parses and in
// which run is a global function: no case may fail with the sandbox's syntax_error or
// run_missing (other failures, such as a TypeError on the empty arguments, are the
// program's own business).
func TestSandboxParsesAcceptedCases(t *testing.T) {
	e := sandboxEngine(t)
	n := 0
	for _, c := range readCases(t, "testdata/compile.txt") {
		prog, _ := Compile(c.src, Options{MaxSourceBytes: c.max})
		if prog == nil {
			continue
		}
		n++
		_, err := sandboxRun(t, e, prog, `{}`, nil)
		var werr *wasm.Fault
		if errors.As(err, &werr) && (werr.Code == wasm.CodeSyntaxError || werr.Code == wasm.CodeRunMissing) {
			t.Errorf("%s: the sandbox cannot load the output: %v\n%s", c.name, err, prog.Source)
		}
	}
	if n < 30 {
		t.Errorf("only %d accepted cases ran", n)
	}
}

// The output keeps the module's strict mode: run sees no global this, and a top-level
// this (undefined in a module) does not become the global object in the script.
func TestSandboxStrictMode(t *testing.T) {
	src := `const top = this;
export function run() {
  return { runThis: this === undefined, top: top === undefined, f: (function () { return this === undefined; })() };
}
`
	prog, diags := Compile(src, Options{})
	if prog == nil {
		t.Fatalf("rejected: %+v", diags)
	}
	res, err := sandboxRun(t, sandboxEngine(t), prog, `{}`, nil)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if want := `{"runThis":true,"top":true,"f":true}`; string(res.Value) != want {
		t.Errorf("value = %s, want %s", res.Value, want)
	}
}

// What static checks cannot see, such as the Function constructor reached through
// [].constructor.constructor, compiles, and must be stopped by the sandbox at run time.
func TestSandboxStopsWhatChecksCannotSee(t *testing.T) {
	src := `export function run() {
  const F = ([] as any).constructor.constructor;
  return { v: F("return 1 + 1")() };
}
`
	prog, diags := Compile(src, Options{})
	if prog == nil {
		t.Fatalf("rejected: %+v", diags)
	}
	res, err := sandboxRun(t, sandboxEngine(t), prog, `{}`, nil)
	if err == nil {
		t.Fatalf("the sandbox ran code built from a string: value %s", res.Value)
	}
	var werr *wasm.Fault
	if !errors.As(err, &werr) || werr.Code != wasm.CodeJSError {
		t.Fatalf("err = %v, want a js_error", err)
	}
	t.Logf("the sandbox refused: %s", werr.Message)
}
