package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tapeStore makes a store with one process that registered the clock_visits
// candidate and called it: twice with a result, once with a time zone the clock
// refuses (a failed call). It returns the store, the PID and the call IDs, from the
// binary alone.
func tapeStore(t *testing.T) (data, pid string, calls []string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "store")
	cand := filepath.Join(repoRoot(t), "testdata", "replay", "clock_visits.json")
	if r := libos(t, "", "validate", cand, "--store", data); r.code != 0 {
		t.Fatalf("validate --store: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var procs []struct {
		PID string `json:"pid"`
	}
	ps := libos(t, "", "ps", "--json", "--data", data)
	if err := json.Unmarshal([]byte(ps.stdout), &procs); err != nil || len(procs) != 1 {
		t.Fatalf("ps: %v\n%s", err, ps.stdout)
	}
	pid = procs[0].PID
	var cands []struct {
		ID string `json:"id"`
	}
	cs := libos(t, "", "candidates", pid, "--json", "--data", data)
	if err := json.Unmarshal([]byte(cs.stdout), &cands); err != nil || len(cands) != 1 {
		t.Fatalf("candidates: %v\n%s", err, cs.stdout)
	}
	if r := libos(t, "", "call", pid, "register_jit_tool", `{"candidate_id":"`+cands[0].ID+`"}`, "--data", data); r.code != 0 {
		t.Fatalf("register: %d %s", r.code, r.stderr)
	}
	for _, args := range []string{`{"timezone":"UTC"}`, `{"timezone":"Asia/Tokyo"}`, `{"timezone":"Nowhere/Atlantis"}`, `{"x":1}`} {
		tool := "clock_visits"
		if args == `{"x":1}` {
			tool = "echo"
		}
		libos(t, "", "call", pid, tool, args, "--data", data)
	}
	evs := libos(t, "", "events", pid, "--json", "--data", data)
	for _, line := range strings.Split(evs.stdout, "\n") {
		var e struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "tool_called" {
			calls = append(calls, e.CallID)
		}
	}
	if len(calls) < 8 { // validate --store's propose and validate, register, 4 calls
		var all []map[string]any
		if err := json.Unmarshal([]byte(evs.stdout), &all); err == nil {
			calls = nil
			for _, e := range all {
				if e["type"] == "tool_called" {
					calls = append(calls, e["call_id"].(string))
				}
			}
		}
	}
	if len(calls) != 7 {
		t.Fatalf("want 7 tool calls, found %d\n%s", len(calls), evs.stdout)
	}
	return data, pid, calls[3:] // UTC, Tokyo, Atlantis, echo
}

// "Deterministic replay holds across processes and machines: the same store replayed
// on two machines prints byte-identical reports (test it across two processes)": the
// store is copied, as to another machine, and two libos processes replay every call
// at the same time, in text and in JSON.
func TestReplayIsByteIdenticalAcrossProcesses(t *testing.T) {
	data, pid, calls := tapeStore(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", data, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, format := range [][]string{nil, {"--json"}} {
		var wg sync.WaitGroup
		rs := make([]result, 2)
		for i, dir := range []string{data, copyDir} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs[i] = libos(t, "", append([]string{"replay", pid, "--all", "--data", dir}, format...)...)
			}()
		}
		wg.Wait()
		if rs[0].code != 0 || rs[0].stdout != rs[1].stdout || rs[0].stdout == "" {
			t.Fatalf("two processes, one store: exit %d/%d\n%s\n---\n%s\n%s", rs[0].code, rs[1].code, rs[0].stdout, rs[1].stdout, rs[0].stderr)
		}
		if format == nil {
			want := calls[0] + " clock_visits: same\n" + calls[1] + " clock_visits: same\n" + calls[2] + " clock_visits: same\n3 same, 0 different, 0 not replayable\n"
			if rs[0].stdout != want {
				t.Fatalf("replay --all:\n%s\nwant\n%s", rs[0].stdout, want)
			}
		}
	}
}

// The CLI end to end: "libos tape PID CALL_ID … prints a test case {args, expected,
// syscalls:[…]}", "--append CANDIDATE.json adds the case to a candidate file's tests",
// refusals name their reason, and "libos test … with --replay-store DIR, the replay of
// stored calls of the tools those candidates define; exit codes as validate".
func TestTapeAppendTestReplayStore(t *testing.T) {
	data, pid, calls := tapeStore(t)
	r := libos(t, "", "tape", pid, calls[1], "--data", data)
	var tc struct {
		Args     json.RawMessage   `json:"args"`
		Expected map[string]any    `json:"expected"`
		Syscalls []json.RawMessage `json:"syscalls"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tc) != nil || len(tc.Syscalls) != 3 || tc.Expected["visits"] != float64(2) {
		t.Fatalf("tape: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The call that failed (an unknown zone) exports its refusal as expected_error.
	r = libos(t, "", "tape", pid, calls[2], "--data", data)
	var refused struct {
		Expected      json.RawMessage `json:"expected"`
		ExpectedError struct {
			Code string `json:"code"`
		} `json:"expected_error"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &refused) != nil || refused.Expected != nil || refused.ExpectedError.Code == "" {
		t.Fatalf("tape of the failed call: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for call, code := range map[string]string{calls[3]: "not_jit_tool", "call_none": "call_not_found"} {
		if r := libos(t, "", "tape", pid, call, "--data", data); r.code != 1 || !strings.Contains(r.stderr, code+":") {
			t.Errorf("tape of %s: exit %d, want 1 and %s\n%s", call, r.code, code, r.stderr)
		}
	}

	src, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "replay", "clock_visits.json"))
	if err != nil {
		t.Fatal(err)
	}
	cand := filepath.Join(t.TempDir(), "clock_visits.json")
	if err := os.WriteFile(cand, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := libos(t, "", "tape", pid, calls[1], "--append", cand, "--data", data); r.code != 0 || !strings.Contains(r.stdout, "as test 0") {
		t.Fatalf("tape --append: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "tape", pid, calls[2], "--append", cand, "--data", data); r.code != 0 || !strings.Contains(r.stdout, "as test 1") {
		t.Fatalf("tape --append of the refusal: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "validate", cand); r.code != 0 || !strings.Contains(r.stdout, "--- PASS: clock_visits/test_0") || !strings.Contains(r.stdout, "--- PASS: clock_visits/test_1") {
		t.Fatalf("the candidate with its appended tapes validates: %d\n%s", r.code, r.stdout)
	}
	if r := libos(t, "", "test", cand, "--replay-store", data); r.code != 0 || strings.Count(r.stdout, "--- PASS: clock_visits/replay") != 3 {
		t.Fatalf("test --replay-store with the registered code: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// One line of the logic changed: the appended test and the replay of the Tokyo
	// call fail, each with its diff; exit 1, as validate's for a rejected candidate.
	changed := strings.Replace(string(mustRead(t, cand)), "Number(seen.value) + 1", "Number(seen.value) + 2", 1)
	if err := os.WriteFile(cand, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r = libos(t, "", "test", cand, "--replay-store", data, "--junit", filepath.Join(t.TempDir(), "r.xml"))
	for _, want := range []string{
		"--- FAIL: clock_visits/test_0",
		"--- FAIL: clock_visits/replay " + pid + " " + calls[1],
		"    syscall 2 arguments at $.value: expected 2, observed 3",
		`    - kv.put {"key":"visits","value":2}`,
		`    + kv.put {"key":"visits","value":3}`,
		"0 passed, 1 failed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("libos test with a changed line does not show %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	r = libos(t, "", "replay", pid, calls[1], "--candidate", cand, "--data", data)
	if r.code != 1 || !strings.HasPrefix(r.stdout, calls[1]+" clock_visits: different\n") {
		t.Errorf("replay --candidate with a changed line: %d\n%s", r.code, r.stdout)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTapeAndReplayExpectHead: a cut-back store "is a shorter log that verifies, whose
// newest calls are simply gone"; "--expect-head SEQ:HASH ... refuses such a log, or another
// one, before anything is read from it: exit status 1 when the log ends before SEQ or its
// event SEQ has another hash" (tape and replay, as 'libos events --verify --expect-head').
func TestTapeAndReplayExpectHead(t *testing.T) {
	data, pid, calls := tapeStore(t)
	old := filepath.Join(t.TempDir(), "old")
	copyDir(t, data, old) // the store as it was: the state a roll-back returns to
	if r := libos(t, "", "call", pid, "clock_visits", `{"timezone":"UTC"}`, "--data", data); r.code != 0 {
		t.Fatalf("call: %d %s", r.code, r.stderr)
	}
	r := libos(t, "", "events", pid, "--head", "--data", data)
	head := strings.TrimSpace(r.stdout)
	if r.code != 0 || head == "" {
		t.Fatalf("--head: %d %s", r.code, r.stderr)
	}

	// The log the head came from: both go on as without the flag.
	if r := libos(t, "", "tape", pid, calls[1], "--expect-head", head, "--data", data); r.code != 0 || !strings.Contains(r.stdout, `"syscalls"`) {
		t.Fatalf("tape of the log it came from: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "replay", pid, "--all", "--expect-head", head, "--data", data); r.code != 0 || !strings.Contains(r.stdout, "4 same, 0 different") {
		t.Fatalf("replay of the log it came from: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The cut-back copy verifies on its own, and every call it still holds replays the
	// same, so without the flag nothing shows that a call is gone ...
	if r := libos(t, "", "replay", pid, "--all", "--data", old); r.code != 0 || !strings.Contains(r.stdout, "3 same, 0 different") {
		t.Fatalf("replay of the shorter log without an anchor: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// ... and with it both refuse the log, reading nothing from it.
	for _, args := range [][]string{{"tape", pid, calls[1]}, {"replay", pid, "--all"}, {"replay", pid, calls[0]}} {
		r := libos(t, "", append(args, "--expect-head", head, "--data", old)...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "libos "+args[0]+": ") || !strings.Contains(r.stderr, "were removed") {
			t.Errorf("%v on the shorter log: exit %d, want 1 naming the removed events\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}

	// Another log of the same length: the old copy went on with another call.
	if r := libos(t, "", "call", pid, "clock_visits", `{"timezone":"Asia/Tokyo"}`, "--data", old); r.code != 0 {
		t.Fatalf("call: %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"tape", pid, calls[1]}, {"replay", pid, "--all"}} {
		r := libos(t, "", append(args, "--expect-head", head, "--data", old)...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "another log") {
			t.Errorf("%v on another log: exit %d, want 1 naming another log\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}

	// An anchor that is not SEQ:HASH is a usage error; an unknown process is refused
	// as without the flag.
	for _, bad := range []string{"12", "x:00", "3:abcd"} {
		if r := libos(t, "", "replay", pid, "--all", "--expect-head", bad, "--data", data); r.code != 2 {
			t.Errorf("replay --expect-head %q: exit %d, want 2", bad, r.code)
		}
		if r := libos(t, "", "tape", pid, calls[1], "--expect-head", bad, "--data", data); r.code != 2 {
			t.Errorf("tape --expect-head %q: exit %d, want 2", bad, r.code)
		}
	}
	if r := libos(t, "", "tape", "proc_none", calls[1], "--expect-head", head, "--data", data); r.code != 1 || !strings.Contains(r.stderr, "call_not_found:") {
		t.Errorf("tape of an unknown process: exit %d\n%s", r.code, r.stderr)
	}
}
