package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// gcLines runs the binary with GODEBUG=gctrace=1,inittrace=1 and the given GOGC ("" for
// none) and returns the collections it reports (those before the last package
// initialisation, and those after it, while the command runs) and the packages in the
// order they were initialised.
func gcLines(t *testing.T, gogc string, args ...string) (duringInit, collections []string, inits []string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), libosBin, args...)
	for _, kv := range testEnv(t) {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GODEBUG=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GODEBUG=gctrace=1,inittrace=1")
	if gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+gogc)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("libos %v: %v\n%s", args, err, stderr.String())
	}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case strings.HasPrefix(line, "gc ") && len(f) > 2 && strings.HasPrefix(f[2], "@"):
			collections = append(collections, line)
		case strings.HasPrefix(line, "init ") && len(f) > 1:
			inits = append(inits, f[1])
			duringInit = append(duringInit, collections...)
			collections = nil
		}
	}
	return duringInit, collections, inits
}

// "No GC during package initialisation": the libraries' initialisation builds a heap
// that is all live when main starts, so package initgc turns the collector off first,
// and a command that never runs (--help) exits without a collection.
func TestNoCollectionDuringInitialisation(t *testing.T) {
	duringInit, collections, inits := gcLines(t, "", "--help")
	if len(duringInit) != 0 {
		t.Errorf("the collector ran during package initialisation:\n%s", strings.Join(duringInit, "\n"))
	}
	if len(collections) != 0 {
		t.Errorf("libos --help collected after initialisation:\n%s", strings.Join(collections, "\n"))
	}
	const initgcPath = "github.com/agentlibos/libos/cmd/libos/internal/initgc"
	at := -1
	for i, p := range inits {
		if p == initgcPath {
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("inittrace does not list %s; packages: %v", initgcPath, inits)
	}
	// The libraries that allocate most in their initialisation must come after it.
	for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema/v6", "github.com/nats-io/nats-server/v2/server"} {
		for i, p := range inits {
			if p == heavy && i < at {
				t.Errorf("%s is initialised before initgc, with the collector on", heavy)
			}
		}
	}
}

// "validate already uses GOGC 400; every other command the default; an explicit GOGC
// environment variable always wins": a one-file validate never reaches the 16 MB at which
// its first collection would come, while with GOGC=1 from the environment it collects.
func TestValidateGCTargetAndGOGCFromEnvironmentWins(t *testing.T) {
	cand := filepath.Join(repoRoot(t), "testdata", "candidates", "good_sum_exact.json")
	// The two runs below read the compiled guest from the shared cache, as a CI job with
	// a cache step does: compiling it would be another heap.
	if r := libos(t, "", "cache", "warm"); r.code != 0 {
		t.Fatalf("libos cache warm: exit %d: %s", r.code, r.stderr)
	}
	_, own, _ := gcLines(t, "", "validate", cand)
	if len(own) != 0 {
		t.Errorf("validate with its own target (validateGCPercent) collected:\n%s", strings.Join(own, "\n"))
	}
	_, env, _ := gcLines(t, "1", "validate", cand)
	if len(env) == 0 {
		t.Errorf("validate with GOGC=1 in the environment never collected after initialisation: the environment's target did not win")
	}
}

// "Every other command [runs with] the default": the root command gives the collector,
// off since initialisation, the runtime's default target, or GOGC's when the environment
// names one.
func TestCommandsRestoreTheCollector(t *testing.T) {
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("libos version: exit %d: %s", code, errb.String())
	}
	want := defaultGCPercent
	if os.Getenv("GOGC") != "" {
		want = prev
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if got := int(s[0].Value.Uint64()); got != want {
		t.Errorf("after libos version the collector's target is %d, want %d", got, want)
	}
}

// The collector is off until root's PersistentPreRunE gives it a target, and cobra runs
// only the nearest PersistentPreRun(E) of a command: a command that declared its own would
// run with no collector at all (a 'libos serve' would grow without bound). None may.
func TestNoCommandSkipsTheRootHook(t *testing.T) {
	root := newRoot(&env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.PersistentPreRun != nil || sub.PersistentPreRunE != nil {
				t.Errorf("%q has a PersistentPreRun of its own, so root's, which gives the collector its target, never runs for it", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(root)
	if root.PersistentPreRunE == nil {
		t.Fatal("the root command has no PersistentPreRunE")
	}
}
