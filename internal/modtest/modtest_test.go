package modtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// root is the checkout: two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// goEnv is an environment in which only the go command is on PATH, cgo is off and the
// module proxy is not used (every module comes from the module cache the repository's
// own build filled), so that nothing but the Go toolchain can take part in a build.
func goEnv(t *testing.T, extra ...string) (goBin string, env []string) {
	t.Helper()
	goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command at %s: %v", goBin, err)
	}
	out, err := exec.Command(goBin, "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	home := t.TempDir()
	env = []string{
		"PATH=" + filepath.Dir(goBin),
		"HOME=" + home,
		"GOCACHE=" + vals[0],
		"GOMODCACHE=" + vals[1],
		"GOPATH=" + vals[2],
		"GOPROXY=off",
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
		"TMPDIR=" + os.TempDir(),
	}
	return goBin, append(env, extra...)
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), dir, err, out.String())
	}
	return out.String()
}

const program = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/agentlibos/libos"
)

func main() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "libos-external-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sys, err := libos.Open(ctx, dir, libos.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Close()
	img, err := libos.DefaultImage()
	if err != nil {
		log.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		log.Fatal(err)
	}
	res, err := sys.HandleFrame(ctx, pid, []byte(` + "`" + `{"name":"echo","arguments":"{\"n\":9007199254740993}"}` + "`" + `))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("echo", res.Text)
	res, err = sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(` + "`" + `{
		"name": "double",
		"description": "Double an integer.",
		"source_code": "export function run(args: { n: number }) { return { n: args.n * 2 }; }",
		"input_schema": {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false},
		"output_schema": {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false},
		"tests": [{"args":{"n":2},"expected":{"n":4},"syscalls":[]}]
	}` + "`" + `))
	if err != nil {
		log.Fatal(err)
	}
	var p struct{ CandidateID string ` + "`json:\"candidate_id\"`" + ` }
	_ = json.Unmarshal(res.Structured, &p)
	if _, err := sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(` + "`" + `{"candidate_id":"` + "`" + `+p.CandidateID+` + "`" + `"}` + "`" + `)); err != nil {
		log.Fatal(err)
	}
	res, err = sys.HandleFrame(ctx, pid, []byte(` + "`" + `{"name":"double","arguments":{"n":21}}` + "`" + `))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("double", res.Text)
	fmt.Println("guest", libos.Version().Guest.SHA256 != "")
}
`

// The module is usable as a dependency with no build step: "a test builds a throwaway
// module outside the repository that requires this module through a replace directive
// pointing at the checkout, imports the public API, and runs a tool call end to end",
// with only the Go toolchain (no make, no clang).
func TestExternalModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	repo := root(t)
	goBin, env := goEnv(t)
	mod := t.TempDir()
	gomod := "module example.com/embedder\n\ngo 1.26\n\nrequire github.com/agentlibos/libos v0.0.0\n\nreplace github.com/agentlibos/libos => " + repo + "\n"
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(program)} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := run(t, mod, env, goBin, "run", ".")
	want := "echo {\"n\":9007199254740993}\ndouble {\"n\":42}\nguest true\n"
	if out != want {
		t.Fatalf("the external program printed\n%s\nwant\n%s", out, want)
	}
}

// "another builds ./cmd/libos from a clean git archive of HEAD with only go build (no
// make, no clang)": whatever the build needs is committed.
func TestArchiveBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	repo := root(t)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	if err := exec.Command(git, "-C", repo, "rev-parse", "--verify", "HEAD").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	src := t.TempDir()
	archive := filepath.Join(t.TempDir(), "head.tar")
	if out, err := exec.Command(git, "-C", repo, "archive", "--format=tar", "-o", archive, "HEAD").CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	goBin, env := goEnv(t)
	bin := filepath.Join(t.TempDir(), "libos")
	run(t, src, env, goBin, "build", "-o", bin, "./cmd/libos")
	out := run(t, src, env, bin, "version")
	if !strings.Contains(out, "guest sha256 ") || !strings.Contains(out, "QuickJS 2021-03-27") {
		t.Fatalf("libos version of the archive build:\n%s", out)
	}
}

// "The test suite cross-builds at least linux/arm64 and windows/amd64 (go build only)
// so a platform-specific file cannot break them unnoticed", and make dist is
// "reproducible (-trimpath, no build IDs or timestamps that differ between two runs:
// build twice and compare)": linux/arm64 is built twice with the release flags of
// scripts/dist.sh and the two binaries compared byte for byte.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the command")
	}
	repo := root(t)
	flags := []string{"build", "-trimpath", "-ldflags=-s -w -buildid=", "-o"}
	out := t.TempDir()
	build := func(goos, goarch, name string) []byte {
		goBin, env := goEnv(t, "GOOS="+goos, "GOARCH="+goarch)
		bin := filepath.Join(out, name)
		run(t, repo, env, goBin, append(flags, bin, "./cmd/libos")...)
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := build("linux", "arm64", "libos-linux-arm64")
	b := build("linux", "arm64", "libos-linux-arm64-again")
	if !bytes.Equal(a, b) {
		t.Error("two builds of linux/arm64 with the release flags differ")
	}
	if w := build("windows", "amd64", "libos-windows-amd64.exe"); !bytes.HasPrefix(w, []byte("MZ")) {
		t.Error("the windows/amd64 build is not a PE executable")
	}
}
