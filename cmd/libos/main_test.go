package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// libosBin is the binary under test, built once per test binary: the end-to-end
// tests run what users install, not the package's functions.
var libosBin string

// cacheDir is the XDG cache shared by every child, so the guest is compiled once.
var cacheDir string

func TestMain(m *testing.M) {
	// The test binary links package initgc too, and has no root command run to give the
	// collector its target back (see ownGCTarget).
	useGC(defaultGCPercent)
	dir, err := os.MkdirTemp("", "libos-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	libosBin = filepath.Join(dir, "libos")
	cacheDir = filepath.Join(dir, "cache")
	build := exec.Command("go", "build", "-o", libosBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// libos runs the binary with args and a private default store (LIBOS_DATA), so no
// test touches the user's data.
func libos(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return libosAt(t, "", stdin, args...)
}

// libosAt runs the binary in dir ("" for the test's directory).
func libosAt(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, libosBin, args...)
	cmd.Env = testEnv(t)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("libos %v: %v", args, err)
	}
	return r
}

// testEnv is the environment of a libos child: LIBOS_DATA points into the test's
// temporary directory and the compilation cache into the test binary's; without
// XDG_RUNTIME_DIR, operator sockets go beside the test's stores, not into the user's
// runtime directory.
func testEnv(t *testing.T) []string {
	env := []string{"LIBOS_DATA=" + filepath.Join(t.TempDir(), "default-store"), "XDG_CACHE_HOME=" + cacheDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LIBOS_DATA=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			env = append(env, kv)
		}
	}
	return env
}

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
