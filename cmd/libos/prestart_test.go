package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentlibos/libos/cmd/libos/internal/prestart"
	"github.com/spf13/pflag"
)

// Package prestart: "for those commands it calls wasm.Prestart with the engine the
// command asks for", and "the command takes the prestarted engine only when it asks for
// the same one". A validate of one file, with the default cache directory and with
// --cache-dir, and a serve that opens a store, run on the prestarted sandbox (their
// debug line says so); the validation passes and the server stops at the end of its
// input. (That the other commands prestart nothing is TestPlan's, in package prestart.)
func TestValidateRunsOnThePrestartedSandbox(t *testing.T) {
	cand := filepath.Join(repoRoot(t), "testdata", "candidates", "good_sum_exact.json")
	for _, args := range [][]string{
		{"--log-level", "debug", "validate", cand},
		{"--log-level=debug", "validate", "--cache-dir", filepath.Join(t.TempDir(), "cache"), cand},
	} {
		r := libos(t, "", args...)
		if r.code != 0 {
			t.Fatalf("libos %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, prestartedSandbox) {
			t.Errorf("libos %v did not run on the prestarted sandbox; stderr:\n%s", args, r.stderr)
		}
	}
	data := filepath.Join(t.TempDir(), "store")
	r := libos(t, "", "--log-level", "debug", "serve", "--data", data)
	if r.code != 0 || !strings.Contains(r.stderr, prestartedSandbox) {
		t.Errorf("libos serve: exit %d, and its sandbox was not the prestarted one; stderr:\n%s", r.code, r.stderr)
	}
}

// "This package imports only the sandbox ... so it initialises before the heavy
// libraries do": the libraries whose initialisation costs most come after it, so
// that the sandbox's start overlaps them.
func TestPrestartInitialisesBeforeTheHeavyLibraries(t *testing.T) {
	_, _, inits := gcLines(t, "", "--help")
	const prestartPath = "github.com/agentlibos/libos/cmd/libos/internal/prestart"
	at := map[string]int{}
	for i, p := range inits {
		at[p] = i
	}
	pos, ok := at[prestartPath]
	if !ok {
		t.Fatalf("inittrace does not list %s; packages: %v", prestartPath, inits)
	}
	for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema/v6", "github.com/nats-io/nats-server/v2/server", "github.com/evanw/esbuild/internal/js_parser"} {
		i, ok := at[heavy]
		switch {
		case !ok:
			t.Errorf("inittrace does not list %s: the check names a package the binary no longer links", heavy)
		case i < pos:
			t.Errorf("%s is initialised before %s", heavy, prestartPath)
		}
	}
}

// plan skips the values of the root command's flags that take one ("--data validate
// ps" is not validate): its list must be every such flag the root command has, or a
// command line with a new one would be read wrongly.
func TestPrestartKnowsTheRootFlagsWithValues(t *testing.T) {
	var want []string
	newRoot(&env{}).PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.NoOptDefVal == "" { // takes a value
			want = append(want, "--"+f.Name)
		}
	})
	got := prestart.RootValueFlags()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("prestart skips the values of %v; the root command's flags with values are %v", got, want)
	}
}
