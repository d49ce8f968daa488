package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOperatorCleanup: the Skills say "stop for Host/operator cleanup or
// coordination", so the binary gives the operator that cleanup, over the operator
// socket while 'libos serve' holds the store and on the store itself otherwise:
// bindings, revoke-tool, pause, resume, kill, checkpoint, fork, candidates --discard
// and deactivate-skill. Each is recorded in the process's log with by "operator", and
// each refuses what it must: a discarded candidate cannot be validated or registered,
// and a revoked tool's name is free only for a genuinely new candidate.
func TestOperatorCleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	c, _, stderr := startServe(t, ctx, data)
	pid := spawnedPID(t, stderr)
	op := func(args ...string) result {
		t.Helper()
		return libos(t, "", append(args, "--data", data)...)
	}
	cand, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "candidates", "good_clock_now.json"))
	if err != nil {
		t.Fatal(err)
	}
	model := func(name, args string) (string, bool) {
		t.Helper()
		res, err := c.call(ctx, name, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return textOf(t, res), res.IsError
	}
	propose := func() string {
		t.Helper()
		out, isErr := model("propose_jit_tool", string(cand))
		var p struct {
			CandidateID string `json:"candidate_id"`
		}
		if isErr || json.Unmarshal([]byte(out), &p) != nil {
			t.Fatalf("propose_jit_tool: %s", out)
		}
		return p.CandidateID
	}
	idArgs := func(id string) string { return `{"candidate_id":"` + id + `"}` }

	// The model registers clock_now; bindings lists it.
	first := propose()
	if out, isErr := model("register_jit_tool", idArgs(first)); isErr {
		t.Fatalf("register: %s", out)
	}
	if r := op("bindings", pid); r.code != 0 || !regexp.MustCompile(`(?m)^clock_now\s+tool_[0-9a-f]{32}\s+`+first+`\s+`+pid+`\s+ephemeral_process\s`).MatchString(r.stdout) {
		t.Fatalf("bindings: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := op("bindings", "pid_nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown_process") {
		t.Errorf("bindings of an unknown process: %d %s", r.code, r.stderr)
	}

	// "a discarded candidate cannot be validated or registered".
	spare := propose2(t, model, cand, "clock_spare")
	if r := op("candidates", pid, "--discard", spare, "--reason", "not needed"); r.code != 0 || r.stdout != "discarded "+pid+": "+spare+"\n" {
		t.Fatalf("candidates --discard: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, step := range []string{"validate_jit_tool", "register_jit_tool"} {
		if out, isErr := model(step, idArgs(spare)); !isErr || !strings.HasPrefix(out, "candidate_discarded: ") {
			t.Errorf("%s of a discarded candidate: %s", step, out)
		}
	}
	if r := op("candidates", pid, "--discard", first); r.code != 1 || !strings.Contains(r.stderr, "already_registered") {
		t.Errorf("discard of a registered candidate: %d %s", r.code, r.stderr)
	}
	if r := op("candidates", pid); r.code != 0 || !regexp.MustCompile(spare+`\s+clock_spare\s+discarded`).MatchString(r.stdout) {
		t.Errorf("candidates after the discard: %d\n%s", r.code, r.stdout)
	}

	// pause refuses every call until resume; pausing twice is refused.
	if r := op("pause", pid); r.code != 0 || r.stdout != "paused "+pid+"\n" {
		t.Fatalf("pause: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if out, isErr := model("echo", `{"x":1}`); !isErr || !strings.HasPrefix(out, "process_paused: ") {
		t.Errorf("a call of a paused process: %s", out)
	}
	if r := op("pause", pid); r.code != 1 || !strings.Contains(r.stderr, "invalid_state") {
		t.Errorf("pause of a paused process: %d %s", r.code, r.stderr)
	}
	if r := op("resume", pid); r.code != 0 || r.stdout != "resumed "+pid+"\n" {
		t.Fatalf("resume: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if out, isErr := model("echo", `{"x":1}`); isErr || out != `{"x":1}` {
		t.Errorf("a call after resume: %s", out)
	}

	// checkpoint and fork: the fork binds clock_now again under a new tool ID,
	// running the parent's candidate.
	r := op("checkpoint", pid)
	ckpt := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^ckpt_[0-9a-f]{32}$`).MatchString(ckpt) {
		t.Fatalf("checkpoint: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = op("fork", ckpt)
	child := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^pid_[0-9a-f]{32}$`).MatchString(child) || child == pid {
		t.Fatalf("fork: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := op("bindings", child, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"candidate_pid": "`+pid+`"`) {
		t.Errorf("bindings of the fork: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = op("fork", ckpt)
	doomed := strings.TrimSpace(r.stdout)
	if r.code != 0 || doomed == child {
		t.Fatalf("a second fork: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := op("fork", "ckpt_00000000000000000000000000000000"); r.code == 0 {
		t.Errorf("fork of an unknown checkpoint succeeded: %s", r.stdout)
	}

	// revoke-tool: the tool is gone, its candidate cannot come back, a new one can.
	if r := op("revoke-tool", pid, "clock_now", "--reason", "wrong zone"); r.code != 0 || r.stdout != "revoked tool "+pid+": clock_now\n" {
		t.Fatalf("revoke-tool: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if out, isErr := model("clock_now", `{"timezone":"UTC"}`); !isErr || !strings.HasPrefix(out, "unknown_tool: ") {
		t.Errorf("a call of the revoked tool: %s", out)
	}
	if out, isErr := model("register_jit_tool", idArgs(first)); !isErr || !strings.HasPrefix(out, "already_registered: ") {
		t.Errorf("registering the revoked tool's candidate again: %s", out)
	}
	if r := op("revoke-tool", pid, "clock_now"); r.code != 1 || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("revoking a tool that is not there: %d %s", r.code, r.stderr)
	}
	fresh := propose()
	if out, isErr := model("register_jit_tool", idArgs(fresh)); isErr {
		t.Errorf("a new candidate under the freed name: %s", out)
	}

	// deactivate-skill, as the model's deactivate_skill does.
	if out, isErr := model("activate_skill", `{"name":"protocol-diagnostics"}`); isErr {
		t.Fatalf("activate_skill: %s", out)
	}
	if r := op("deactivate-skill", pid, "protocol-diagnostics"); r.code != 0 || r.stdout != "deactivated "+pid+": protocol-diagnostics\n" {
		t.Errorf("deactivate-skill: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := op("deactivate-skill", pid, "protocol-diagnostics"); r.code != 1 {
		t.Errorf("deactivating a Skill that is not active: %d %q %s", r.code, r.stdout, r.stderr)
	}

	// kill, through the server; the killed process takes no more calls.
	if r := op("kill", doomed); r.code != 0 || r.stdout != "killed "+doomed+"\n" {
		t.Fatalf("kill: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := op("pause", doomed); r.code != 2 || !strings.Contains(r.stderr, "unknown_process") {
		t.Errorf("pause of a killed process: %d %s", r.code, r.stderr)
	}
	_ = c.cs.Close() // stops the server; its store is free again

	// Without a server the same commands open the store themselves.
	if r := op("bindings", pid); r.code != 0 || !strings.Contains(r.stdout, fresh) {
		t.Errorf("bindings without a server: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := op("pause", pid); r.code != 0 || r.stdout != "paused "+pid+"\n" {
		t.Errorf("pause without a server: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// fork without a server: the command's own System re-creates the JIT binding
	// through the kernel's one JIT wiring, as the server's did.
	r = op("fork", ckpt)
	offline := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^pid_[0-9a-f]{32}$`).MatchString(offline) || offline == child || offline == doomed {
		t.Fatalf("fork without a server: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := op("bindings", offline, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"candidate_pid": "`+pid+`"`) {
		t.Errorf("bindings of the fork made without a server: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// "diagnose --jit" on a fork: its binding's candidate belongs to the parent.
	if r := op("diagnose", "--json", "--pid", child, "--jit", "clock_now"); r.code != 0 || !strings.Contains(r.stdout, `"timezone": "UTC"`) && !strings.Contains(r.stdout, `"timezone":"UTC"`) {
		t.Errorf("diagnose --jit on a fork: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := op("kill", child); r.code != 0 || r.stdout != "killed "+child+"\n" {
		t.Errorf("kill without a server: %d %q %s", r.code, r.stdout, r.stderr)
	}

	// Every cleanup is in the log, by the operator.
	byOperator := func(p string, types ...string) {
		t.Helper()
		r := op("events", p, "--json")
		if r.code != 0 {
			t.Fatalf("events %s: %d %s", p, r.code, r.stderr)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var ev struct {
				Type string         `json:"type"`
				Data map[string]any `json:"data"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("events --json line %q: %v", line, err)
			}
			if ev.Data["by"] == "operator" {
				seen[ev.Type] = true
			}
		}
		for _, typ := range types {
			if !seen[typ] {
				t.Errorf("no %s event by the operator in the log of %s", typ, p)
			}
		}
	}
	byOperator(pid, "jit_discarded", "process_paused", "process_resumed", "checkpoint_created", "checkpoint_forked", "jit_revoked", "skill_deactivated")
	byOperator(child, "process_forked", "process_killed")
	byOperator(doomed, "process_forked", "process_killed")
}

// propose2 proposes the candidate under another name and returns its ID.
func propose2(t *testing.T, model func(name, args string) (string, bool), cand []byte, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cand, &m); err != nil {
		t.Fatal(err)
	}
	m["name"], _ = json.Marshal(name)
	b, _ := json.Marshal(m)
	out, isErr := model("propose_jit_tool", string(b))
	var p struct {
		CandidateID string `json:"candidate_id"`
	}
	if isErr || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("propose_jit_tool: %s", out)
	}
	return p.CandidateID
}
