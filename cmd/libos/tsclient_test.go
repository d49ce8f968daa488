package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptClient drives 'libos serve' with the official MCP TypeScript SDK
// client (testdata/mcp-client), "so a client we did not write proves the wire
// format". It installs the client's locked dependencies with npm ci when they are
// missing, and skips only when node or npm are not installed.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript SDK client check needs Node 20 or newer (apt-get install nodejs npm)")
	}
	dir := filepath.Join(repoRoot(t), "testdata", "mcp-client")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("npm is not installed: the TypeScript SDK client check needs it once, for npm ci (apt-get install npm)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefix", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci --prefix %s: %v\n%s", dir, err, out)
		}
	}
	script := filepath.Join(dir, "client.mjs")
	run := func(t *testing.T, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
		cmd.Env = testEnv(t)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasSuffix(string(out), "PASS\n") {
			t.Fatalf("node client.mjs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, proj := range []string{"direct", "multiplexed"} {
		t.Run("stdio/"+proj, func(t *testing.T) {
			run(t, "stdio", libosBin, filepath.Join(t.TempDir(), "store"), proj)
		})
		t.Run("http/"+proj, func(t *testing.T) {
			url, cmd, _ := startHTTP(t, "--data", filepath.Join(t.TempDir(), "store"), "--projection", proj)
			run(t, "http", url, proj)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}
