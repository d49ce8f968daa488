package syscalls

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/wasm"
)

var (
	engineOnce sync.Once
	engine     *wasm.Engine
	engineErr  error
)

func sandbox(t testing.TB) *wasm.Engine {
	t.Helper()
	engineOnce.Do(func() { engine, engineErr = wasm.NewEngine(context.Background(), wasm.Config{}) })
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return engine
}

func runOpts() wasm.Options {
	return wasm.Options{Seed: 1}
}

const clockProgram = `async function run(args, libos) {
  try {
    const now = await libos.syscall("clock.now", {timezone: args.timezone});
    return {ok: true, now};
  } catch (e) {
    return {ok: false, code: String(e.code), message: String(e.message)};
  }
}`

// TestGuestClockNowThroughRouter: a guest awaiting clock.now under the router, with and
// without clock:now.
func TestGuestClockNowThroughRouter(t *testing.T) {
	e := sandbox(t)
	r, s := newRouter(t, RouterConfig{})
	cases := []struct {
		rule string
		caps *CapSet
		want string
	}{
		{"with clock:now the Promise resolves with the route's result", NewCapSet(CapClockNow),
			`{"ok":true,"now":{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}}`},
		{"without clock:now the Promise rejects with code capability_denied", NewCapSet(CapKVRead),
			`{"ok":false,"code":"capability_denied","message":"syscalls: clock.now requires capability clock:now, which this process does not hold"}`},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			before := auditCount(t, s, "p")
			res, err := e.Run(context.Background(), clockProgram, json.RawMessage(`{"timezone":"UTC"}`),
				r.For(Caller{PID: "p", Tool: "clock_tool", Capabilities: tc.caps}), runOpts())
			if err != nil {
				t.Fatal(err)
			}
			if eq, _ := jsonexact.EqualJSON(res.Value, []byte(tc.want)); !eq {
				t.Fatalf("got %s\nwant %s", res.Value, tc.want)
			}
			if auditCount(t, s, "p") != before+1 {
				t.Fatalf("the decision is an audit event")
			}
			if ev := lastAudit(t, s, "p"); ev.Tool != "clock_tool" || ev.Route != "clock.now" {
				t.Fatalf("audit %+v", ev)
			}
		})
	}
	t.Run("an unknown route rejects with the fixed error inside the guest", func(t *testing.T) {
		prog := strings.Replace(clockProgram, `"clock.now"`, `"clock.today"`, 1)
		res, err := e.Run(context.Background(), prog, json.RawMessage(`{"timezone":"UTC"}`),
			r.For(Caller{PID: "p", Capabilities: NewCapSet(CapClockNow)}), runOpts())
		if err != nil {
			t.Fatal(err)
		}
		want := `{"ok":false,"code":"unknown_syscall","message":"` + unknownSyscallMessage + `"}`
		if string(res.Value) != want {
			t.Fatalf("got %s", res.Value)
		}
		// A name the sandbox itself refuses (longer than any route) gets the same bytes:
		// the guest cannot tell which layer said no.
		long := strings.Replace(clockProgram, `"clock.now"`, `"`+strings.Repeat("x", 300)+`"`, 1)
		res, err = e.Run(context.Background(), long, json.RawMessage(`{"timezone":"UTC"}`),
			r.For(Caller{PID: "p", Capabilities: NewCapSet(CapClockNow)}), runOpts())
		if err != nil || string(res.Value) != want {
			t.Fatalf("sandbox-refused name: %s, %v; want %s", res.Value, err, want)
		}
	})
}

// TestTapeAndRouterAgree runs one program two ways: under the router against a real
// store, and under the tape recorded from what the router answered.
func TestTapeAndRouterAgree(t *testing.T) {
	e := sandbox(t)
	r, _ := newRouter(t, RouterConfig{})
	prog := `async function run(args, libos) {
  const got = await libos.syscall("kv.get", {key: args.key});
  const next = (got.found ? got.value : 0) + 1;
  await libos.syscall("kv.put", {key: args.key, value: next});
  const now = await libos.syscall("clock.now", {timezone: "Asia/Tokyo"});
  return {next, at: now.iso8601};
}`
	rec := &recorder{next: r.For(Caller{PID: "p", Capabilities: NewCapSet(CapKVRead, CapKVWrite, CapClockNow)})}
	live, err := e.Run(context.Background(), prog, json.RawMessage(`{"key":"hits"}`), rec, runOpts())
	if err != nil {
		t.Fatal(err)
	}
	tape, err := NewTape(rec.entries)
	if err != nil {
		t.Fatal(err)
	}
	replay, err := e.Run(context.Background(), prog, json.RawMessage(`{"key":"hits"}`), tape, runOpts())
	if err != nil || tape.Finish() != nil {
		t.Fatalf("replay: %v, %v", err, tape.Finish())
	}
	if string(live.Value) != string(replay.Value) || string(live.Value) != `{"next":1,"at":"2026-01-02T12:04:05+09:00"}` {
		t.Fatalf("live %s, replay %s", live.Value, replay.Value)
	}
}

// recorder passes calls to the router and writes down a tape of them.
type recorder struct {
	next    *Bound
	entries []TapeEntry
}

func (r *recorder) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	res, err := r.next.Syscall(ctx, name, args)
	e := TapeEntry{Name: name, Args: append(json.RawMessage(nil), args...), Result: res}
	var se *Error
	if errors.As(err, &se) {
		e.Error = &TapeError{Code: string(se.Code), Message: se.Message}
	}
	r.entries = append(r.entries, e)
	return res, err
}

// BenchmarkRoutedClockNow measures one routed syscall round trip from the guest:
// clock.now with the capability held and its audit event written. Each Run makes 50
// calls; ns/syscall is the figure to report. "disk" syncs every audit event to a store
// on disk (a caller that is not Deferred); "disk-deferred" is the engine's tool call:
// the audit events are deferred and one synced write after the run (the settlement)
// makes them durable; "mem" uses an in-memory file system, which isolates the sandbox
// and router cost from fsync.
func BenchmarkRoutedClockNow(b *testing.B) {
	e := sandbox(b)
	for _, fs := range []string{"disk", "disk-deferred", "mem"} {
		b.Run(fs, func(b *testing.B) {
			var st *store.Store
			if fs != "mem" {
				var err error
				if st, err = store.Open(b.TempDir(), store.Options{}); err != nil {
					b.Fatal(err)
				}
				defer st.Close()
			} else {
				st = openStore(b)
			}
			r, _ := newRouter(b, RouterConfig{Store: st})
			const perRun = 50
			prog := `async function run(args, libos) {
  let last;
  for (let i = 0; i < 50; i++) last = await libos.syscall("clock.now", {timezone: "UTC"});
  return last;
}`
			deferred := fs == "disk-deferred"
			sys := r.For(Caller{PID: "bench", Capabilities: NewCapSet(CapClockNow), Deferred: deferred})
			opts := runOpts()
			opts.Limits.WallTime = time.Minute
			for b.Loop() {
				if _, err := e.Run(context.Background(), prog, json.RawMessage(`{}`), sys, opts); err != nil {
					b.Fatal(err)
				}
				if deferred {
					if err := st.Sync(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRun), "ns/syscall")
		})
	}
}

// BenchmarkRouterClockNow is the same call without the sandbox: the router's own cost
// (schema, capability, provider, result schema, audit event), on disk (synced, or
// deferred to a settlement that is not part of this measure) and in memory.
func BenchmarkRouterClockNow(b *testing.B) {
	for _, fs := range []string{"disk", "disk-deferred", "mem"} {
		b.Run(fs, func(b *testing.B) {
			var st *store.Store
			if fs != "mem" {
				var err error
				if st, err = store.Open(b.TempDir(), store.Options{}); err != nil {
					b.Fatal(err)
				}
				defer st.Close()
			} else {
				st = openStore(b)
			}
			r, _ := newRouter(b, RouterConfig{Store: st})
			sys := r.For(Caller{PID: "bench", Capabilities: NewCapSet(CapClockNow), Deferred: fs == "disk-deferred"})
			args := json.RawMessage(`{"timezone":"UTC"}`)
			for b.Loop() {
				if _, err := sys.Syscall(context.Background(), "clock.now", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// "syscalls ... does not import the sandbox": what the engine hands to wasm.Run is
// checked here, in a test, so that the package itself links no wazero.
var (
	_ wasm.Syscaller = (*Bound)(nil)
	_ wasm.Syscaller = (*Tape)(nil)
)
