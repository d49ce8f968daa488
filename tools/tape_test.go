package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// replayCandidate reads testdata/replay/NAME.json, compacted.
func replayCandidate(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "replay", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// callID sends one model frame and returns the call's ID (also for a failed call:
// the newest tool_called of pid).
func (w *world) callID(t testing.TB, pid, name, args string) (string, error) {
	t.Helper()
	frame, _ := json.Marshal(map[string]any{"name": name, "arguments": json.RawMessage(args)})
	res, err := w.k.HandleFrame(context.Background(), pid, frame)
	if err == nil {
		return res.CallID, nil
	}
	evs := w.events(t, pid)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == engine.EventToolCalled {
			return evs[i].CallID, err
		}
	}
	t.Fatalf("no tool_called for %s: %v", name, err)
	return "", err
}

// registerCandidate proposes and registers candidate obj in a new process of w.
func (w *world) registerCandidate(t testing.TB, obj string, caps ...string) string {
	t.Helper()
	pid := w.spawn(t, engine.Direct, caps...)
	id := w.propose(t, pid, obj)
	w.mustCall(t, pid, tools.RegisterName, idArg(id))
	return pid
}

func codeIs(err error, code tools.Code) bool {
	var te *tools.Error
	return errors.As(err, &te) && te.Code == code
}

// Turning real calls into tests, end to end: "A registered tool that reads the clock and kv:
// call it live, export its tape, validate the candidate with the exported test
// appended (passes), change one line of the tool's logic and replay (reported
// different, with the diff)."
func TestLiveCallExportValidateReplay(t *testing.T) {
	w := newWorld(t)
	cand := replayCandidate(t, "clock_visits")
	pid := w.registerCandidate(t, cand, "clock:now", "kv:read", "kv:write")
	w.mustCall(t, pid, "clock_visits", `{"timezone":"UTC"}`)
	call, err := w.callID(t, pid, "clock_visits", `{"timezone":"Europe/Paris"}`)
	if err != nil {
		t.Fatal(err)
	}

	tc, err := tools.ExportTape(w.st, pid, call)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.st.ToolResult(pid, call)
	if err != nil {
		t.Fatal(err)
	}
	if string(tc.Args) != `{"timezone":"Europe/Paris"}` || string(tc.Expected) != string(res.Structured) {
		t.Fatalf("the tape's args and expected are the call's: %s %s", tc.Args, tc.Expected)
	}
	var names []string
	for _, e := range tc.Syscalls {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "clock.now kv.get kv.put" || string(tc.Syscalls[1].Result) != `{"found":true,"value":1}` ||
		string(tc.Syscalls[2].Args) != `{"key":"visits","value":2}` {
		t.Fatalf("the tape is every syscall in order with its exact args and recorded result: %+v", tc.Syscalls)
	}

	// The exported test, appended to the candidate's tests, passes validation.
	test, _ := json.Marshal([]tools.TestCase{tc})
	c, err := tools.ParseCandidate([]byte(withField(t, cand, "tests", string(test))))
	if err != nil {
		t.Fatal(err)
	}
	if rep := w.jit.Validator().Validate(context.Background(), c); !rep.OK || len(rep.Tests) != 1 || !rep.Tests[0].OK {
		t.Fatalf("the candidate with its exported test must validate: %+v", rep)
	}

	// The registered code replays the same.
	r, err := tools.Replay(context.Background(), w.st, sandbox(t), pid, call, tools.ReplayOptions{})
	if err != nil || r.Verdict != tools.VerdictSame {
		t.Fatalf("replaying the registered code: %+v %v", r, err)
	}
	if r.Text() != call+" clock_visits: same" {
		t.Fatalf("report line %q", r.Text())
	}

	// One line changed: the count goes up by two. The first difference is the kv.put's
	// arguments.
	changed := strings.Replace(c.SourceCode, "Number(seen.value) + 1", "Number(seen.value) + 2", 1)
	r, err = tools.Replay(context.Background(), w.st, sandbox(t), pid, call, tools.ReplayOptions{Source: changed})
	if err != nil {
		t.Fatal(err)
	}
	want := call + ` clock_visits: different
  syscall 2 arguments at $.value: expected 2, observed 3
  - kv.put {"key":"visits","value":2}
  + kv.put {"key":"visits","value":3}`
	if r.Verdict != tools.VerdictDifferent || r.Text() != want {
		t.Fatalf("a changed line is reported with its diff:\n%s\nwant\n%s", r.Text(), want)
	}

	// A change that only touches the result is a result difference.
	changed = strings.Replace(c.SourceCode, "String(now.timezone)", `"UTC"`, 1)
	r, err = tools.Replay(context.Background(), w.st, sandbox(t), pid, call, tools.ReplayOptions{Source: changed})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != tools.VerdictDifferent || r.Diff.Kind != "result" || r.Diff.Path != "$.timezone" ||
		!strings.Contains(r.Text(), `result at $.timezone: expected "Europe/Paris", observed "UTC"`) {
		t.Fatalf("a changed result is reported with its path: %s", r.Text())
	}

	// A change in the order of syscalls.
	changed = strings.Replace(c.SourceCode, `const now = await libos.syscall("clock.now", { timezone: args.timezone });`, "", 1)
	changed = strings.Replace(changed, "return {", `const now = await libos.syscall("clock.now", { timezone: args.timezone }); return {`, 1)
	r, err = tools.Replay(context.Background(), w.st, sandbox(t), pid, call, tools.ReplayOptions{Source: changed})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != tools.VerdictDifferent || r.Diff.Kind != "syscall_order" || *r.Diff.Syscall != 0 {
		t.Fatalf("a changed order is reported at its first syscall: %s", r.Text())
	}

	all, err := tools.ReplayAll(context.Background(), w.st, sandbox(t), pid, tools.ReplayOptions{})
	if err != nil || len(all) != 2 || tools.Summary(all) != "2 same, 0 different, 0 not replayable" {
		t.Fatalf("replay --all: %v %v", all, err)
	}
}

// "It refuses, with a typed error naming the reason, a call that is unsettled,
// truncated, or whose data the image's data-flow rules forbid exporting … a call of a
// built-in tool".
func TestExportRefusals(t *testing.T) {
	w := newWorld(t)
	cand := replayCandidate(t, "clock_visits")
	ctx := context.Background()

	t.Run("built-in tool", func(t *testing.T) {
		pid := w.spawn(t, engine.Direct)
		call, err := w.callID(t, pid, tools.EchoName, `{"x":1}`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeNotJITTool) {
			t.Fatalf("export of an echo call: %v", err)
		}
		if r, err := tools.Replay(ctx, w.st, sandbox(t), pid, call, tools.ReplayOptions{}); err != nil || r.Verdict != tools.VerdictNotReplayable || r.Code != string(tools.CodeNotJITTool) {
			t.Fatalf("replay of an echo call: %+v %v", r, err)
		}
	})

	t.Run("unknown call", func(t *testing.T) {
		pid := w.spawn(t, engine.Direct)
		if _, err := tools.ExportTape(w.st, pid, "call_nope"); !codeIs(err, tools.CodeCallNotFound) {
			t.Fatalf("export of an unknown call: %v", err)
		}
		if _, err := tools.ExportTape(w.st, "no-such-pid", "call_nope"); !codeIs(err, tools.CodeCallNotFound) {
			t.Fatalf("export of an unknown process: %v", err)
		}
	})

	t.Run("truncated", func(t *testing.T) {
		img, err := tools.DefaultImage()
		if err != nil {
			t.Fatal(err)
		}
		img.Tools, img.BaseTools, img.Skills = lifecycle, nil, nil
		img.Limits.Journal.MaxEntryBytes = 20 // clock.now's result is larger
		pid, err := w.k.SpawnImage(ctx, img)
		if err != nil {
			t.Fatal(err)
		}
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, cand)))
		call, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeJournalTruncated) {
			t.Fatalf("export of a call with a truncated journal: %v", err)
		}
	})

	// "its returned value as expected (or the expected refusal)": a call that failed
	// with a typed error exports expected_error, and validation of the candidate with
	// that test passes; changing the expected code makes it fail.
	t.Run("failed call: exported as its expected refusal", func(t *testing.T) {
		pid := w.registerCandidate(t, cand, "clock:now") // no kv:read: the call fails
		call, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
		if codeOf(err) != "capability_denied" {
			t.Fatalf("the call should fail with capability_denied without kv:read: %v", err)
		}
		tc, err := tools.ExportTape(w.st, pid, call)
		if err != nil {
			t.Fatalf("export of a failed call: %v", err)
		}
		if tc.Expected != nil || tc.ExpectedError == nil || tc.ExpectedError.Code != "capability_denied" ||
			len(tc.Syscalls) != 2 || tc.Syscalls[1].Error == nil || tc.Syscalls[1].Error.Code != "capability_denied" {
			b, _ := json.Marshal(tc)
			t.Fatalf("the exported refusal: %s", b)
		}
		// The refusal's layer is exported as a field, not as a prefix of its message.
		if te := tc.Syscalls[1].Error; te.Layer != "syscalls" || strings.HasPrefix(te.Message, "syscalls:") {
			t.Fatalf("the exported refusal's layer and message: %+v", te)
		}
		b, _ := json.Marshal(tc)
		if !strings.Contains(string(b), `"expected_error":{"code":"capability_denied"}`) || strings.Contains(string(b), `"expected":`) {
			t.Fatalf("the exported form: %s", b)
		}
		validate := func(test []byte) tools.Report {
			c, err := tools.ParseCandidate([]byte(withField(t, cand, "tests", "["+string(test)+"]")))
			if err != nil {
				t.Fatal(err)
			}
			return w.jit.Validator().Validate(ctx, c)
		}
		if rep := validate(b); !rep.OK || len(rep.Tests) != 1 || !rep.Tests[0].OK {
			t.Fatalf("the candidate with the exported refusal must validate: %s", mustJSON(rep))
		}
		wrong := strings.Replace(string(b), `"code":"capability_denied"}`, `"code":"approval_denied"}`, 1)
		if rep := validate([]byte(wrong)); rep.OK || rep.Errors[0].Code != tools.CodeExpectedMismatch {
			t.Fatalf("another expected refusal must fail: %s", mustJSON(rep))
		}
		// The failure replays: the refusal the code did not catch is the same.
		r, err := tools.Replay(ctx, w.st, sandbox(t), pid, call, tools.ReplayOptions{})
		if err != nil || r.Verdict != tools.VerdictSame {
			t.Fatalf("replay of a failed call: %+v %v", r, err)
		}
	})

	t.Run("a failure after the code returned is not a test", func(t *testing.T) {
		strict := withField(t, cand, "output_schema", `{"type":"object","properties":{"never":{"type":"string"}},"required":["never"]}`)
		strict = withField(t, strict, "tests", `[]`)
		pid := w.registerCandidate(t, strict, "clock:now", "kv:read", "kv:write")
		call, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
		if codeOf(err) != "output_invalid" {
			t.Fatalf("the call should fail its output schema: %v", err)
		}
		if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeNotReplayable) {
			t.Fatalf("export of an output_invalid call: %v", err)
		}
	})

	// "No recovery of codes from text": whether a limit_exceeded came after the code
	// returned is the tool_failed event's stage, never its reason's words. A sandbox
	// limit (the code's own failure) is a test's expected refusal; the result limit
	// (after the code returned) is not.
	t.Run("limit_exceeded: the recorded stage decides", func(t *testing.T) {
		open := withField(t, cand, "output_schema", `{"type":"object"}`)
		open = withField(t, open, "tests", `[]`)
		stageOf := func(pid, call string) string {
			for _, e := range w.events(t, pid) {
				if e.Type == engine.EventToolFailed && e.CallID == call {
					var d struct{ Stage string }
					if err := json.Unmarshal(e.Data, &d); err != nil {
						t.Fatal(err)
					}
					return d.Stage
				}
			}
			t.Fatalf("no tool_failed for %s", call)
			return ""
		}

		loop := withField(t, open, "source_code", `"export async function run(args: { timezone: string }, libos: any) {\n  for (let i = 0; i < 1000; i++) { await libos.syscall(\"clock.now\", { timezone: args.timezone }); }\n  return {};\n}\n"`)
		pid := w.registerCandidate(t, loop, "clock:now")
		call, err := w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
		if codeOf(err) != "limit_exceeded" || stageOf(pid, call) != engine.FailedInHandler {
			t.Fatalf("a call over the sandbox's syscall bound: %v, stage %q", err, stageOf(pid, call))
		}
		tc, err := tools.ExportTape(w.st, pid, call)
		if err != nil || tc.ExpectedError == nil || tc.ExpectedError.Code != "limit_exceeded" {
			t.Fatalf("a sandbox limit is the code's own refusal, exported as expected_error: %+v %v", tc, err)
		}
		// "The tape's entry bound should equal the sandbox's syscall bound per run, so
		// that a call stopped at that bound round-trips through export and validation."
		if len(tc.Syscalls) != wasm.DefaultSyscalls || tools.DefaultMaxTapeEntries != wasm.DefaultSyscalls {
			t.Fatalf("the call stopped at the sandbox's bound of %d syscalls; its tape has %d entries, the tape bound is %d",
				wasm.DefaultSyscalls, len(tc.Syscalls), tools.DefaultMaxTapeEntries)
		}
		withTest, err := tools.ParseCandidate([]byte(withField(t, loop, "tests", "["+mustJSON(tc)+"]")))
		if err != nil {
			t.Fatal(err)
		}
		if rep := w.jit.Validator().Validate(ctx, withTest); !rep.OK || len(rep.Tests) != 1 || !rep.Tests[0].OK {
			t.Fatalf("the exported test of a call stopped at the syscall bound must validate: %s", mustJSON(rep))
		}

		big := withField(t, open, "source_code", `"export async function run(args: { timezone: string }, libos: any) {\n  return { s: \"x\".repeat(70000) };\n}\n"`)
		pid = w.registerCandidate(t, big, "clock:now")
		call, err = w.callID(t, pid, "clock_visits", `{"timezone":"UTC"}`)
		if codeOf(err) != "limit_exceeded" || stageOf(pid, call) != engine.FailedAtResult {
			t.Fatalf("a call over the result limit: %v, stage %q", err, stageOf(pid, call))
		}
		if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeNotReplayable) {
			t.Fatalf("export of a call refused at its result: %v", err)
		}
	})

	t.Run("a test has expected or expected_error, never both, and a code", func(t *testing.T) {
		for _, bad := range []string{
			`{"args":{},"expected":{},"expected_error":{"code":"capability_denied"},"syscalls":[]}`,
			`{"args":{},"syscalls":[]}`,
			`{"args":{},"expected_error":{"code":"Not A Code"},"syscalls":[]}`,
			`{"args":{},"expected_error":{"code":"capability_denied","message":"x"},"syscalls":[]}`,
			// "a test's expected_error code must be a registered one"
			`{"args":{},"expected_error":{"code":"disk_full"},"syscalls":[]}`,
		} {
			c, err := tools.ParseCandidate([]byte(withField(t, cand, "tests", "["+bad+"]")))
			if err != nil {
				t.Fatal(err)
			}
			if err := tools.CheckProposal(c, tools.Limits{}); !codeIs(err, tools.CodeInvalidTest) {
				t.Errorf("test %s: %v, want invalid_test", bad, err)
			}
		}
	})
}

var _ = store.ErrNotFound
