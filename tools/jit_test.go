package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// world is the real pipeline: a Pebble store in a temporary directory, the kernel,
// the JIT lifecycle on the real QuickJS sandbox and the real syscall router.
type world struct {
	dir string
	st  *store.Store
	k   *engine.Kernel
	jit *tools.JIT
}

// openWorld opens the pipeline with the JIT lifecycle as the kernel's JIT loader
// (engine.Config.JIT), the one wiring.
func openWorld(t testing.TB, dir string, cfg tools.Config) *world {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Sandbox = st, sandbox(t)
	jit, err := tools.NewJIT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.Open(context.Background(), st, engine.Config{Builtins: append([]engine.Tool{tools.Echo()}, jit.Tools()...), JIT: jit})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{dir: dir, st: st, k: k, jit: jit}
	t.Cleanup(w.close)
	return w
}

func newWorld(t testing.TB) *world { return openWorld(t, t.TempDir(), tools.Config{}) }

func (w *world) close() {
	if w.k != nil {
		w.k.Close()
		w.st.Close()
		w.k = nil
	}
}

var lifecycle = []string{tools.EchoName, tools.ProposeName, tools.ValidateName, tools.RegisterName}

func (w *world) spawn(t testing.TB, proj engine.Projection, caps ...string) string {
	t.Helper()
	pid, err := w.k.Spawn(context.Background(), engine.ProcessConfig{Projection: proj, Capabilities: caps, Tools: lifecycle})
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// call sends one model frame, {"name", "arguments"}.
func (w *world) call(t testing.TB, pid, name, args string) (json.RawMessage, error) {
	t.Helper()
	frame, _ := json.Marshal(map[string]any{"name": name, "arguments": json.RawMessage(args)})
	res, err := w.k.HandleFrame(context.Background(), pid, frame)
	if err != nil {
		return nil, err
	}
	return res.Structured, nil
}

func (w *world) mustCall(t testing.TB, pid, name, args string) map[string]any {
	t.Helper()
	out, err := w.call(t, pid, name, args)
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
	if err := w.st.Verify(pid); err != nil {
		t.Fatalf("the event chain does not verify: %v", err)
	}
	return evs
}

func count(evs []store.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func data(t testing.TB, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func last(t testing.TB, evs []store.Event, typ string) map[string]any {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return data(t, evs[i])
		}
	}
	t.Fatalf("no %s event", typ)
	return nil
}

func codeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	if err == nil {
		return ""
	}
	return "untyped: " + err.Error()
}

func candidateJSON(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(candidatesDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// withField returns the candidate object with key set to raw JSON value.
func withField(t testing.TB, obj, key, raw string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatal(err)
	}
	m[key] = json.RawMessage(raw)
	b, _ := json.Marshal(m)
	return string(b)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var (
	candidateRE = regexp.MustCompile(`^tcand_[0-9a-f]{32}$`)
	toolRE      = regexp.MustCompile(`^tool_[0-9a-f]{32}$`)
)

func (w *world) propose(t testing.TB, pid, obj string) string {
	t.Helper()
	out := w.mustCall(t, pid, tools.ProposeName, obj)
	id, _ := out["candidate_id"].(string)
	if !candidateRE.MatchString(id) || len(out) != 1 {
		t.Fatalf("propose returned %v; want exactly {candidate_id: tcand_ + 128 random bits}", out)
	}
	return id
}

func idArg(id string) string { return `{"candidate_id":` + jsonString(id) + `}` }

// liveTime checks that iso8601 is the live time in UTC, within the window of the call.
func liveTime(t testing.TB, iso string, before, after time.Time) {
	t.Helper()
	got, err := time.Parse(time.RFC3339, iso)
	if err != nil {
		t.Fatalf("iso8601 %q: %v", iso, err)
	}
	if got.Before(before.Truncate(time.Second)) || got.After(after) {
		t.Fatalf("iso8601 %s is not the live time (call between %s and %s)", iso, before, after)
	}
}

// TestClockExampleDirect follows the JIT authoring Skill's workflow in the direct projection: propose
// the clock example, validate it, register it, then call it by name. "In direct mode
// the next model request can expose the JIT as its own native schema and it is called
// by name."
func TestClockExampleDirect(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "clock:now")
	var changed atomic.Int32
	defer w.k.OnToolsChanged(func(p string) {
		if p == pid {
			changed.Add(1)
		}
	})()

	id := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	rep := w.mustCall(t, pid, tools.ValidateName, idArg(id))
	if rep["ok"] != true {
		t.Fatalf("validation: %v", rep)
	}
	for _, k := range []string{"ok", "errors", "warnings", "logs", "tests", "validated_at"} {
		if _, ok := rep[k]; !ok {
			t.Fatalf("the report has no %q: %v", k, rep)
		}
	}
	if len(rep) != 6 {
		t.Fatalf("the report is exactly {ok, errors, warnings, logs, tests, validated_at}: %v", rep)
	}
	tests := rep["tests"].([]any)
	if len(tests) != 1 || tests[0].(map[string]any)["ok"] != true || tests[0].(map[string]any)["index"] != float64(0) {
		t.Fatalf("tests: %v", tests)
	}

	reg := w.mustCall(t, pid, tools.RegisterName, idArg(id))
	if len(reg) != 3 || reg["name"] != "clock_now" || reg["scope"] != "ephemeral_process" || !toolRE.MatchString(reg["tool_id"].(string)) {
		t.Fatalf("register returns exactly {tool_id, name, scope}: %v", reg)
	}
	if changed.Load() != 1 {
		t.Fatalf("tools-changed fired %d times for the registration, want 1", changed.Load())
	}

	// "The projected tool list changes at once (direct mode: the new function with its
	// input schema)."
	defs, err := w.k.Tools(pid)
	if err != nil {
		t.Fatal(err)
	}
	var def *render.Tool
	for i := range defs {
		if defs[i].Name == "clock_now" {
			def = &defs[i]
		}
	}
	if def == nil {
		t.Fatalf("clock_now is not in the direct projection: %v", defs)
	}
	if !strings.Contains(string(def.InputSchema), `"timezone"`) {
		t.Fatalf("the projected input schema is not the stored one: %s", def.InputSchema)
	}
	if def.Annotations.ReadOnly || def.Annotations.Idempotent || !def.Annotations.Destructive {
		t.Fatalf("every JIT is conservatively side-effecting and non-idempotent: %+v", def.Annotations)
	}

	before := time.Now()
	out := w.mustCall(t, pid, "clock_now", `{"timezone":"UTC"}`)
	liveTime(t, out["iso8601"].(string), before, time.Now())
	if out["timezone"] != "UTC" || len(out) != 2 {
		t.Fatalf("result %v", out)
	}
	evs := w.events(t, pid)
	sc := last(t, evs, syscalls.EventSyscall)
	if sc["route"] != "clock.now" || sc["decision"] != "allowed" || sc["tool"] != "clock_now" {
		t.Fatalf("the syscall is audited under the calling tool: %v", sc)
	}
	called := last(t, evs, engine.EventToolCalled)
	if called["tool_id"] != reg["tool_id"] {
		t.Fatalf("tool_called names the tool_id: %v", called)
	}
}

// registered proposes, validates and registers the clock example in a new process.
func (w *world) registered(t testing.TB, proj engine.Projection, caps ...string) (pid, toolID string) {
	t.Helper()
	pid = w.spawn(t, proj, caps...)
	id := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	if rep := w.mustCall(t, pid, tools.ValidateName, idArg(id)); rep["ok"] != true {
		t.Fatalf("validation: %v", rep)
	}
	reg := w.mustCall(t, pid, tools.RegisterName, idArg(id))
	return pid, reg["tool_id"].(string)
}

// TestClockExampleMultiplexed: "In multiplexed mode only the generic run_jit_tool schema
// is exposed … call {"tool_name":"normalize_records","arguments":{...}} from the
// retained contract—never use name."
func TestClockExampleMultiplexed(t *testing.T) {
	w := newWorld(t)

	t.Run("granted clock:now returns the live time", func(t *testing.T) {
		pid, _ := w.registered(t, engine.Multiplexed, "clock:now")
		defs, _ := w.k.Tools(pid)
		for _, d := range defs {
			if d.Name == "clock_now" {
				t.Fatal("the multiplexed list must not show the JIT name")
			}
		}
		before := time.Now()
		out := w.mustCall(t, pid, engine.RunJITTool, `{"tool_name":"clock_now","arguments":{"timezone":"UTC"}}`)
		liveTime(t, out["iso8601"].(string), before, time.Now())
	})

	t.Run("without clock:now the tool fails with capability_denied from inside, audited", func(t *testing.T) {
		pid, _ := w.registered(t, engine.Multiplexed)
		_, err := w.call(t, pid, engine.RunJITTool, `{"tool_name":"clock_now","arguments":{"timezone":"UTC"}}`)
		if codeOf(err) != syscalls.CodeCapabilityDenied {
			t.Fatalf("got %v (%s), want capability_denied", err, codeOf(err))
		}
		if !errors.Is(err, &tools.Error{Code: syscalls.CodeCapabilityDenied}) {
			t.Fatalf("errors.Is with the code: %v", err)
		}
		evs := w.events(t, pid)
		sc := last(t, evs, syscalls.EventSyscall)
		if sc["decision"] != "denied" || sc["code"] != "capability_denied" || sc["capability"] != "clock:now" {
			t.Fatalf("the denial is audited: %v", sc)
		}
		failed := last(t, evs, engine.EventToolFailed)
		if failed["code"] != "capability_denied" || failed["tool"] != "clock_now" {
			t.Fatalf("tool_failed: %v", failed)
		}
	})

	t.Run("a direct call to the JIT name is rejected", func(t *testing.T) {
		pid, _ := w.registered(t, engine.Multiplexed, "clock:now")
		_, err := w.call(t, pid, "clock_now", `{"timezone":"UTC"}`)
		if !errors.Is(err, engine.ErrUnknownTool) {
			t.Fatalf("got %v, want unknown_tool", err)
		}
	})

	t.Run(`{"name":…} instead of tool_name is rejected`, func(t *testing.T) {
		pid, _ := w.registered(t, engine.Multiplexed, "clock:now")
		_, err := w.call(t, pid, engine.RunJITTool, `{"name":"clock_now","arguments":{"timezone":"UTC"}}`)
		if !errors.Is(err, engine.ErrSchemaInvalid) || !strings.Contains(err.Error(), "tool_name") {
			t.Fatalf("got %v, want schema_invalid naming tool_name", err)
		}
		if n := count(w.events(t, pid), syscalls.EventSyscall); n != 0 {
			t.Fatalf("%d syscalls ran", n)
		}
	})
}

// TestSchemaInvalidCallNeverRuns: "Input validated against the stored input schema
// before the sandbox starts (a schema-invalid call never runs code and never makes
// syscalls)."
func TestSchemaInvalidCallNeverRuns(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		proj      engine.Projection
		name, arg string
	}{
		{engine.Direct, "clock_now", `{"timezone":5}`},
		{engine.Direct, "clock_now", `{}`},
		{engine.Direct, "clock_now", `{"timezone":"UTC","extra":1}`},
		{engine.Multiplexed, engine.RunJITTool, `{"tool_name":"clock_now","arguments":{"timezone":["UTC"]}}`},
	} {
		pid, _ := w.registered(t, tc.proj, "clock:now")
		before := w.events(t, pid)
		_, err := w.call(t, pid, tc.name, tc.arg)
		if !errors.Is(err, engine.ErrSchemaInvalid) {
			t.Fatalf("%s %s: got %v, want schema_invalid", tc.name, tc.arg, err)
		}
		after := w.events(t, pid)
		if count(after, syscalls.EventSyscall) != 0 || count(after, engine.EventToolCalled) != count(before, engine.EventToolCalled) {
			t.Fatalf("%s %s: the call reached the sandbox", tc.name, tc.arg)
		}
	}
}

// TestOutputSchemaFailureKeepsEffects: "an output-schema failure after syscalls does
// not roll them back and the audit log shows what ran."
func TestOutputSchemaFailureKeepsEffects(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "kv:write")
	obj := candidateJSON(t, "good_clock_now.json")
	obj = withField(t, obj, "name", `"put_then_lie"`)
	obj = withField(t, obj, "source_code", jsonString(`export async function run(args: { timezone: string }, libos: any) {
  await libos.syscall("kv.put", { key: "marker", value: args.timezone });
  return { iso8601: 42, timezone: args.timezone };
}`))
	obj = withField(t, obj, "tests", `[]`)
	id := w.propose(t, pid, obj)
	w.mustCall(t, pid, tools.RegisterName, idArg(id)) // auto-validates
	_, err := w.call(t, pid, "put_then_lie", `{"timezone":"UTC"}`)
	if !errors.Is(err, engine.ErrOutputInvalid) {
		t.Fatalf("got %v, want output_invalid", err)
	}
	v, err := w.st.KVGet(pid, "marker")
	if err != nil || string(v) != `"UTC"` {
		t.Fatalf("the kv.put that ran before the output failure is not rolled back: %q %v", v, err)
	}
	evs := w.events(t, pid)
	sc := last(t, evs, syscalls.EventSyscall)
	if sc["route"] != "kv.put" || sc["decision"] != "allowed" {
		t.Fatalf("the audit log shows what ran: %v", sc)
	}
	if f := last(t, evs, engine.EventToolFailed); f["code"] != "output_invalid" {
		t.Fatalf("tool_failed %v", f)
	}
}

// TestJITCallAuthorityIsLive: a JIT tool's syscalls run with the process's live
// authority and the image's sandbox bounds: a revocation stops the next call, the
// image's wall time stops a runaway program.
func TestJITCallAuthorityIsLive(t *testing.T) {
	w := newWorld(t)
	pid, _ := w.registered(t, engine.Direct, "clock:now")
	w.mustCall(t, pid, "clock_now", `{"timezone":"UTC"}`)
	if err := w.k.Revoke(context.Background(), pid, "clock:now"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(t, pid, "clock_now", `{"timezone":"UTC"}`); codeOf(err) != syscalls.CodeCapabilityDenied {
		t.Fatalf("after the revocation: %v", err)
	}

	img := &image.Image{Format: image.ImageFormat, Name: "tight", Version: "1", Tools: lifecycle,
		Limits: image.ImageLimits{Sandbox: image.SandboxLimits{WallTimeMillis: 100}}}
	tight, err := w.k.SpawnImage(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	obj := withField(t, candidateJSON(t, "bad_runaway_loop.json"), "tests", `[]`)
	w.mustCall(t, tight, tools.RegisterName, idArg(w.propose(t, tight, obj)))
	_, err = w.call(t, tight, "spin", `{}`)
	if codeOf(err) != "limit_exceeded" || !strings.Contains(err.Error(), "100ms") {
		t.Fatalf("the image's sandbox wall time applies: %v", err)
	}
}
