package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOperatorLive: the operator commands reach the kernel of a running 'libos
// serve' (which holds the store): an operator-class tool call waits for
// 'libos approve', 'libos deny' fails it with approval_denied, and grant/revoke change
// the live process's capabilities, each recorded in its event log.
func TestOperatorLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	image := filepath.Join(repoRoot(t), "testdata", "images", "approvals.yaml") // echo needs an operator's approval
	c, _, stderr := startServe(t, ctx, data, "--image", image)
	pid := spawnedPID(t, stderr)

	pending := func() string {
		t.Helper()
		for i := 0; i < 200; i++ {
			r := libos(t, "", "approvals", "--json", "--data", data)
			var list []struct {
				ID, PID, Subject, State string
			}
			if r.code != 0 {
				t.Fatalf("approvals: %d %s", r.code, r.stderr)
			}
			_ = json.Unmarshal([]byte(r.stdout), &list)
			if len(list) == 1 && list[0].PID == pid && list[0].Subject == "echo" && list[0].State == "pending" {
				return list[0].ID
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("no pending approval appeared")
		return ""
	}
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	call := func(args string) chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			res, err := c.call(ctx, "echo", args)
			ch <- outcome{res, err}
		}()
		return ch
	}

	// While serve holds the store, ps and events come from it.
	if r := libos(t, "", "ps", "--data", data); r.code != 0 || !strings.Contains(r.stdout, pid) || !strings.Contains(r.stdout, "guarded@1.0.0") {
		t.Fatalf("ps while serving: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	follow := exec.Command(libosBin, "events", pid, "--follow", "--json", "--data", data)
	follow.Env = testEnv(t)
	followOut := &syncBuffer{}
	follow.Stdout = followOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}

	// "approve ID: the call waiting on it proceeds".
	done := call(`{"x":1}`)
	if r := libos(t, "", "approve", pending(), "--data", data); r.code != 0 {
		t.Fatalf("approve: %d %s", r.code, r.stderr)
	}
	o := <-done
	if o.err != nil || o.res.IsError || textOf(t, o.res) != `{"x":1}` {
		t.Fatalf("the approved call: %v %+v", o.err, o.res)
	}
	// --follow printed the events of the call as they were appended.
	for i := 0; i < 100 && !strings.Contains(followOut.String(), `"type":"tool_result"`); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	_ = follow.Process.Signal(os.Interrupt)
	if err := follow.Wait(); err != nil {
		t.Errorf("events --follow after SIGINT: %v", err)
	}
	if out := followOut.String(); !strings.Contains(out, `"type":"approval_requested"`) || !strings.Contains(out, `"type":"tool_result"`) {
		t.Errorf("events --follow did not show the call:\n%s", out)
	}

	// "deny ID: the waiting call fails with approval_denied".
	done = call(`{"x":2}`)
	if r := libos(t, "", "deny", pending(), "--reason", "not now", "--data", data); r.code != 0 {
		t.Fatalf("deny: %d %s", r.code, r.stderr)
	}
	o = <-done
	if o.err != nil || !o.res.IsError || !strings.HasPrefix(textOf(t, o.res), "approval_denied: ") {
		t.Fatalf("the denied call: %v %+v", o.err, o.res)
	}

	// Deciding an unknown approval is refused, with exit 1.
	if r := libos(t, "", "approve", "appr_00000000000000000000000000000000", "--data", data); r.code != 1 {
		t.Errorf("approve of an unknown ID: exit %d %s", r.code, r.stderr)
	}
	// grant and revoke go to the live kernel; an unknown capability is refused.
	if r := libos(t, "", "grant", pid, "clock:now", "--data", data); r.code != 0 || r.stdout != "granted "+pid+": clock:now\n" {
		t.Errorf("grant: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "revoke", pid, "kv:write", "--data", data); r.code != 0 || r.stdout != "revoked "+pid+": kv:write\n" {
		t.Errorf("revoke: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "grant", pid, "fs:write", "--data", data); r.code != 1 {
		t.Errorf("grant of an unknown capability: %d %s", r.code, r.stderr)
	}
	_ = c.cs.Close()

	// Without a server, the commands open the store themselves.
	r := libos(t, "", "events", pid, "--verify", "--data", data)
	for _, want := range []string{"approval_requested", "approval_decided", "capability_granted", "capability_revoked"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the log has no %s:\n%s", want, r.stdout)
		}
	}
	if r := libos(t, "", "approvals", pid, "--data", data); r.code != 0 || strings.Count(r.stdout, "appr_") != 2 {
		t.Errorf("approvals of %s: %d\n%s%s", pid, r.code, r.stdout, r.stderr)
	}
}

// TestImagesAndSkills: 'libos images' checks manifests and 'libos skills check'
// exits non-zero "with every reason, e.g. run_jit_tool in allowed-tools".
func TestImagesAndSkills(t *testing.T) {
	root := repoRoot(t)
	if r := libos(t, "", "images"); r.code != 0 || !strings.Contains(r.stdout, "clock:now, kv:read, kv:write, tools:call") {
		t.Errorf("images: %d\n%s", r.code, r.stdout)
	}
	r := libos(t, "", "images", filepath.Join(root, "testdata", "images", "echo.yaml"), filepath.Join(root, "testdata", "images", "bad-many.yaml"))
	if r.code != 1 || !strings.Contains(r.stderr, "run_jit_tool") || !strings.Contains(r.stderr, "fs:write") {
		t.Errorf("images with a bad manifest: %d\n%s", r.code, r.stderr)
	}
	// "libos images explains an image's egress, secrets and data-flow rules in words."
	r = libos(t, "", "images", filepath.Join(root, "testdata", "images", "egress.yaml"))
	for _, want := range []string{"egress: net.fetch may reach api.example.com, *.corp.example:8443, with GET, POST",
		"{{secret:GITHUB_TOKEN}} in a header is replaced only for api.example.com", `label confidential: kv keys starting with "hr/"`,
		"rule confidential: once a call has seen it, it never reaches the tool's result returned to the model (model)",
		"may be sent out by net.fetch only to *.corp.example:8443"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("images of an egress image: %d, no %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if r := libos(t, "", "images"); !strings.Contains(r.stdout, "egress: none (net.fetch is refused for every host)") ||
		!strings.Contains(r.stdout, "routes: no approval raised, no syscall budget, no size bound") {
		t.Errorf("the default image grants no egress and sets no route slot, and says so:\n%s", r.stdout)
	}
	// The per-route slots in words, each with the manifest field that set it.
	r = libos(t, "", "images", filepath.Join(root, "testdata", "images", "route-slots.yaml"))
	for _, want := range []string{
		"route kv.put: operator approval (approvals.routes); at most 20 (kv.put), 100 (kv), 200 (syscalls) calls (limits.syscall_budgets); " +
			"arguments up to 4096 bytes, results up to 16384 bytes (limits.syscall_sizes)",
		"route clock.now: at most 200 (syscalls) calls (limits.syscall_budgets)\n",
		"route tools.call: at most 200 (syscalls) calls (limits.syscall_budgets); arguments up to 8192 bytes (limits.syscall_sizes)"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("images of an image with route slots: %d, no %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if r := libos(t, "", "skills", "check", filepath.Join(root, "tools", "skills")); r.code != 0 || !strings.HasSuffix(r.stdout, "2 passed, 0 failed\n") {
		t.Errorf("skills check of the project's Skills: %d\n%s", r.code, r.stdout)
	}
	r = libos(t, "", "skills", "check", filepath.Join(root, "testdata", "cli", "skills"))
	if r.code != 1 || !strings.Contains(r.stdout, "run_jit_tool is not a process tool") || !strings.Contains(r.stdout, "/name") {
		t.Errorf("skills check of a bad Skill: %d\n%s", r.code, r.stdout)
	}
	if r := libos(t, "", "serve", "--image", filepath.Join(root, "testdata", "images", "bad-many.yaml")); r.code != 2 || !strings.Contains(r.stderr, "invalid_image") && !strings.Contains(r.stderr, "image") {
		t.Errorf("serve --image with a bad manifest: %d %s", r.code, r.stderr)
	}
}
