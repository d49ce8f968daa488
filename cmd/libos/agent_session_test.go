package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// blockingChat is an OpenAI-compatible server that answers the first len(answers)
// requests from the script and holds every later one open until the test ends,
// telling the test on arrived when each held request came in.
func blockingChat(t *testing.T, answers ...map[string]any) (srv *httptest.Server, arrived chan struct{}) {
	t.Helper()
	arrived = make(chan struct{}, 8)
	release := make(chan struct{})
	var mu sync.Mutex
	next := 0
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n := next
		next++
		mu.Unlock()
		if n >= len(answers) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		writeChatAnswer(w, answers[n])
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, arrived
}

// running is a libos child the test signals or kills while it works.
type running struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	stdin  io.WriteCloser
	done   chan error
}

func startLibos(t *testing.T, env []string, args ...string) *running {
	t.Helper()
	cmd := exec.Command(libosBin, args...)
	cmd.Env = append(testEnv(t), env...)
	r := &running{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = in
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	return r
}

// waitOutput waits until the child's standard output holds want (or fails the test
// when the child ends first).
func (r *running) waitOutput(t *testing.T, want string) {
	t.Helper()
	if _, ok := r.stdout.waitFor(regexp.MustCompile(regexp.QuoteMeta(want)), 90*time.Second); !ok {
		t.Fatalf("no %q from libos:\n%s\n%s", want, r.stdout, r.stderr)
	}
}

// wait waits for the child to end and returns its exit code.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -int(ws.Signal())
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(90 * time.Second):
		t.Fatalf("libos did not end:\n%s\n%s", r.stdout, r.stderr)
		return 0
	}
}

// logEvent is one line of 'libos events --json'.
type logEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// eventsOf returns the one process of the store at data and its log, read through
// 'libos events --json' (one JSON event per line).
func eventsOf(t *testing.T, data string) (string, []logEvent) {
	t.Helper()
	ps := libos(t, "", "--data", data, "ps", "--json")
	var procs []struct {
		PID string `json:"pid"`
	}
	if err := json.Unmarshal([]byte(ps.stdout), &procs); err != nil || len(procs) != 1 {
		t.Fatalf("ps: %v %s %s", err, ps.stdout, ps.stderr)
	}
	ev := libos(t, "", "--data", data, "events", procs[0].PID, "--json")
	if ev.code != 0 {
		t.Fatalf("events: exit %d %s", ev.code, ev.stderr)
	}
	var events []logEvent
	sc := bufio.NewScanner(strings.NewReader(ev.stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e logEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events --json line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	return procs[0].PID, events
}

// countEvents counts the events of type typ whose data contains contains.
func countEvents(events []logEvent, typ, contains string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ && strings.Contains(string(e.Data), contains) {
			n++
		}
	}
	return n
}

// "The conversation is durable: … the loop resumes after a restart from the last
// settled step, never re-sending a tool call whose settlement is unknown." The host
// is killed for real (SIGKILL) while it waits for the model's second answer; a new
// process resumes the run, does not dispatch echo again and finishes.
func TestAgentResumeAfterRealKill(t *testing.T) {
	srv, arrived := blockingChat(t, toolCall("call_1", "echo", `{"n":1}`))
	data := filepath.Join(t.TempDir(), "store")
	r := startLibos(t, nil, "--data", data, "agent", "--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m", "two steps")
	select {
	case <-arrived:
	case err := <-r.done:
		t.Fatalf("libos ended (%v) before its second request:\n%s\n%s", err, r.stdout, r.stderr)
	case <-time.After(90 * time.Second):
		t.Fatalf("no second request:\n%s\n%s", r.stdout, r.stderr)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != -int(syscall.SIGKILL) {
		t.Fatalf("exit %d after SIGKILL", code)
	}
	pid, before := eventsOf(t, data)
	if n := countEvents(before, "tool_called", ""); n != 1 {
		t.Fatalf("%d tool_called events before the resume, want 1", n)
	}
	if n := countEvents(before, "agent_finished", ""); n != 0 {
		t.Fatalf("the killed run recorded an end")
	}

	srv2, bodies := chatScript(t, map[string]any{"content": "resumed after the kill"})
	res := libosWith(t, nil, "", "--data", data, "agent", "--pid", pid, "--resume", "--provider", "openai", "--base-url", srv2.URL+"/v1", "--model", "m")
	if res.code != 0 || !strings.Contains(res.stdout, "resumed after the kill") || !strings.Contains(res.stdout, "[done]") {
		t.Fatalf("resume: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if len(*bodies) != 1 || !strings.Contains((*bodies)[0], "call_1") || !strings.Contains((*bodies)[0], "two steps") {
		t.Fatalf("the resumed request does not carry the conversation: %v", *bodies)
	}
	_, after := eventsOf(t, data)
	if n := countEvents(after, "tool_called", ""); n != 1 {
		t.Errorf("%d tool_called events after the resume, want 1: echo was sent again", n)
	}
	if n := countEvents(after, "agent_finished", `"done"`); n != 1 {
		t.Errorf("%d finished-done events after the resume, want 1", n)
	}
	if v := libos(t, "", "--data", data, "events", pid, "--verify"); v.code != 0 {
		t.Errorf("the log does not verify after a kill and a resume: %s %s", v.stdout, v.stderr)
	}
}

// "pending approvals answered inline (the same durable approval records as libos
// approve)": with an image whose echo needs an operator's approval, the terminal's
// answer decides, and the decision is the durable approval record.
func TestAgentInlineApproval(t *testing.T) {
	image := filepath.Join("..", "..", "testdata", "images", "approvals.yaml")
	for _, tc := range []struct {
		answer, want, decision string
	}{
		{"y\n", "[tool] echo → ok", `"decision":"approved"`},
		{"n\n", "[tool] echo → approval_denied", `"decision":"denied"`},
	} {
		t.Run(strings.TrimSpace(tc.answer), func(t *testing.T) {
			srv, _ := chatScript(t, toolCall("call_1", "echo", `{"n":1}`), map[string]any{"content": "finished"})
			data := filepath.Join(t.TempDir(), "store")
			r := startLibos(t, nil, "--data", data, "agent", "--image", image, "--approvals", "inline",
				"--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m", "call echo")
			r.waitOutput(t, "approve? [y/N]")
			if _, err := io.WriteString(r.stdin, tc.answer); err != nil {
				t.Fatal(err)
			}
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout.String(), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, r.stdout)
			}
			_, events := eventsOf(t, data)
			if countEvents(events, "approval_requested", "") != 1 || countEvents(events, "approval_decided", tc.decision) != 1 {
				var types []string
				for _, e := range events {
					types = append(types, e.Type)
				}
				t.Fatalf("the log does not hold one request and one %s: %v", tc.decision, types)
			}
		})
	}
}

// "Ctrl-C cancels the running call cleanly": SIGINT while a call waits for its
// approval settles that call as cancelled, records the run's end as cancelled and
// exits without a crash; the store verifies.
func TestAgentCtrlCCancelsTheRunningCall(t *testing.T) {
	image := filepath.Join("..", "..", "testdata", "images", "approvals.yaml")
	srv, _ := chatScript(t, toolCall("call_1", "echo", `{"n":1}`), map[string]any{"content": "never asked"})
	data := filepath.Join(t.TempDir(), "store")
	r := startLibos(t, nil, "--data", data, "agent", "--image", image, "--approvals", "inline",
		"--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m", "call echo")
	r.waitOutput(t, "approve? [y/N]")
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := r.wait(t)
	if code != 1 {
		t.Fatalf("exit %d after Ctrl-C, want 1 (the run stopped)\n%s\n%s", code, r.stdout, r.stderr)
	}
	out := r.stdout.String()
	if !strings.Contains(out, "[tool] echo → canceled") || !strings.Contains(out, "[cancelled]") {
		t.Fatalf("output does not show the cancelled call and run:\n%s\n%s", out, r.stderr)
	}
	pid, events := eventsOf(t, data)
	if countEvents(events, "agent_tool_result", "canceled") != 1 || countEvents(events, "agent_finished", `"cancelled"`) != 1 {
		t.Fatalf("the log does not record the cancelled call and run: %d %d", countEvents(events, "agent_tool_result", "canceled"), countEvents(events, "agent_finished", `"cancelled"`))
	}
	if v := libos(t, "", "--data", data, "events", pid, "--verify"); v.code != 0 {
		t.Errorf("the log does not verify: %s %s", v.stdout, v.stderr)
	}
}

// "Provider failures are typed and audited as provider events, never as tool
// failures: … timeouts": a model API that never answers is cut at --timeout and the
// run ends with provider_timeout.
func TestAgentProviderTimeout(t *testing.T) {
	srv, _ := blockingChat(t)
	data := filepath.Join(t.TempDir(), "store")
	res := libosWith(t, nil, "", "--data", data, "agent", "--provider", "openai", "--base-url", srv.URL+"/v1",
		"--model", "m", "--timeout", "300ms", "--max-retries", "0", "hello")
	if res.code != 1 || !strings.Contains(res.stderr, "provider_timeout") {
		t.Fatalf("exit %d, want 1 with provider_timeout\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	_, events := eventsOf(t, data)
	if countEvents(events, "agent_finished", "provider_timeout") != 1 {
		t.Errorf("the run's end does not record provider_timeout")
	}
	if n := countEvents(events, "tool_called", ""); n != 0 {
		t.Errorf("%d tool calls recorded for a provider failure", n)
	}
	if bad := libos(t, "", "--data", data, "agent", "--provider", "openai", "--model", "m", "--timeout", "0s", "x"); bad.code != 2 {
		t.Errorf("--timeout 0s: exit %d %s", bad.code, bad.stderr)
	}
}
