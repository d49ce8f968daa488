package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/cmd/libos/internal/diag"
)

// chatScript is an OpenAI-compatible server answering with scripted chat completions:
// each entry is the assistant message of one answer.
func chatScript(t *testing.T, answers ...map[string]any) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b)+"\nAuthorization: "+r.Header.Get("Authorization"))
		if r.URL.Path != "/v1/chat/completions" || next >= len(answers) {
			http.Error(w, "unexpected request", 500)
			return
		}
		writeChatAnswer(w, answers[next])
		next++
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

// writeChatAnswer answers with a chat completion whose message is msg.
func writeChatAnswer(w http.ResponseWriter, msg map[string]any) {
	finish := "stop"
	if _, ok := msg["tool_calls"]; ok {
		finish = "tool_calls"
	}
	msg["role"] = "assistant"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
}

func toolCall(id, name, args string) map[string]any {
	return map[string]any{"content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
		"function": map[string]any{"name": name, "arguments": args}}}}
}

// libosWith runs the binary with extra environment variables.
func libosWith(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, libosBin, args...)
	cmd.Env = append(testEnv(t), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("libos %v: %v", args, err)
	}
	return r
}

// "libos agent … and the same as a library API": a run against a real HTTP server in
// the OpenAI wire format, the tool call shown as one line with its outcome, the key
// from OPENAI_API_KEY sent to the server and never written to the store or the log.
func TestAgentCommand(t *testing.T) {
	srv, bodies := chatScript(t,
		toolCall("call_1", "echo", `{"probe":[1,{"n":9007199254740993}]}`),
		map[string]any{"content": "echo answered."},
	)
	data := filepath.Join(t.TempDir(), "store")
	const key = "sk-cli-test-secret-0123456789"
	r := libosWith(t, []string{"OPENAI_API_KEY=" + key}, "", "--data", data, "agent", "--provider", "openai",
		"--base-url", srv.URL+"/v1", "--model", "m", "call echo once")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{`[tool] echo → ok {"probe":[1,{"n":9007199254740993}]}`, "echo answered.", "[done]", "2 steps, 1 tool calls, tokens 14 in / 6 out"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if len(*bodies) != 2 || !strings.Contains((*bodies)[0], "Bearer "+key) {
		t.Fatalf("the server saw %d requests; the first: %s", len(*bodies), (*bodies)[0])
	}
	if !strings.Contains((*bodies)[0], `"name":"echo"`) {
		t.Errorf("the first request does not offer echo: %s", (*bodies)[0])
	}
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("the key is in the output")
	}
	ev := libos(t, "", "--data", data, "ps", "--json")
	var procs []struct {
		PID string `json:"pid"`
	}
	if err := json.Unmarshal([]byte(ev.stdout), &procs); err != nil || len(procs) != 1 {
		t.Fatalf("ps: %v %s", err, ev.stdout)
	}
	events := libos(t, "", "--data", data, "events", procs[0].PID, "--json")
	if events.code != 0 || strings.Contains(events.stdout, key) {
		t.Fatalf("events exit %d; key present: %v", events.code, strings.Contains(events.stdout, key))
	}
	for _, typ := range []string{"agent_started", "agent_request", "agent_response", "agent_dispatch", "tool_called", "agent_tool_result", "agent_finished"} {
		if !strings.Contains(events.stdout, `"`+typ+`"`) {
			t.Errorf("the log has no %s event", typ)
		}
	}
	// A usage error says what is wrong and touches nothing.
	bad := libos(t, "", "--data", data, "agent", "--provider", "gemini", "--model", "m", "x")
	if bad.code != 2 || !strings.Contains(bad.stderr, "unknown provider") {
		t.Errorf("unknown provider: exit %d %s", bad.code, bad.stderr)
	}
}

// The protocol-diagnostics Skill: "Call echo once through the same model-facing
// provider path with the smallest top-level object that tests that property" —
// diagnose --provider asks a real model API to make the echo call and records whether
// it reached echo and what came back.
func TestDiagnoseProvider(t *testing.T) {
	srv, bodies := chatScript(t,
		toolCall("call_1", "echo", diag.Sentinel),
		map[string]any{"content": "done"},
	)
	r := libosWith(t, nil, "", "diagnose", "--json", "--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var rep diag.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Path != "provider:openai" || !rep.OK || !rep.Echo.Dispatched || !rep.Echo.Match || !rep.Echo.ModelFaithful {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains((*bodies)[0], "9007199254740993") {
		t.Errorf("the model was not given the sentinel: %s", (*bodies)[0])
	}
	// A model that changes the sentinel is caught: not faithful, no match.
	srv2, _ := chatScript(t, toolCall("call_1", "echo", `{"probe":"libos-echo-roundtrip"}`), map[string]any{"content": "done"})
	r = libosWith(t, nil, "", "diagnose", "--json", "--provider", "openai", "--base-url", srv2.URL+"/v1", "--model", "m")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s %s", err, r.stdout, r.stderr)
	}
	if r.code != 1 || rep.OK || rep.Echo.ModelFaithful || !rep.Echo.Dispatched {
		t.Errorf("exit %d, report %+v", r.code, rep)
	}
}
