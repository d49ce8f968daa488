package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/internal/dirstate"
	"github.com/cockroachdb/pebble/v2"
)

// A command that runs no tool opens the libOS with a lazy sandbox (LazySandbox): the
// read-only ones (ps, events, candidates, ...), and those that install the restored JIT
// tools but run none (the operator's commands, 'libos tools PID', and on a scratch store
// 'libos tools' and 'libos diagnose' without --jit). None of them reads or
// compiles the guest, so with an empty --cache-dir they leave the cache without a
// compiled guest in it, where compiling it would have written wazero's entry.
func TestCommandsThatRunNoToolDoNotCompileTheSandbox(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	// A store with a process, made by the demo with the shared cache.
	pid := demoStore(t, data)

	cache := t.TempDir()
	for _, args := range [][]string{
		{"ps"},          // read-only
		{"events", pid}, // read-only
		{"tools", pid},  // installs the restored JIT tools to list them
		{"pause", pid},  // an operator's change
		{"resume", pid}, // and back
		{"tools"},       // a fresh process in a scratch store
		{"diagnose"},    // the echo diagnostic, in a scratch store
	} {
		args = append(args, "--data", data, "--cache-dir", cache)
		if r := libos(t, "", args...); r.code != 0 {
			t.Fatalf("libos %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	var files []string
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("a command that runs no tool wrote into the compilation cache: %v", files)
	}
}

// storeState describes the store directory dir (dirstate.Of): what a command that only
// reads must leave as it was.
func storeState(t *testing.T, dir string) []string {
	t.Helper()
	st, err := dirstate.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// demoStore is a store the demo made (processes, events, candidates, a registered JIT
// tool), moved to data, and a PID of it with a registered tool.
func demoStore(t *testing.T, data string) string {
	t.Helper()
	r := libos(t, "", "demo", "--keep")
	m := regexp.MustCompile(`the store stays in ([^\s)]+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("demo --keep: %d\n%s", r.code, r.stdout)
	}
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	if err := os.Rename(m[1], data); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`pid (pid_[0-9a-f]{32})`).FindStringSubmatch(r.stdout)[1]
}

// readOnlyCommands are the commands that only read the store, with pid for those that
// take one: each opens it read-only when no server holds it.
func readOnlyCommands(pid string) [][]string {
	return [][]string{
		{"ps"},
		{"ps", "--json"},
		{"events", pid},
		{"events", pid, "--verify"},
		{"candidates", pid},
		{"tools", pid}, // installs the JIT tools of pid, in memory only
		{"tools", pid, "--format", "openai"},
		{"bindings", pid},
		{"approvals"},
		{"approvals", pid},
		{"__complete", "events", ""}, // the shell completion of a PID
	}
}

// "A command that only reads the store (ps, events, candidates, tools PID, bindings,
// approvals, the completion of PIDs) writes nothing into its directory: the files, their sizes,
// contents and modification times and the directory's own time are as they were, the
// store's acknowledged records, still in the WAL the demo left unflushed, are shown,
// and the output is the same every time."
func TestReadOnlyCommandsLeaveTheStoreAsItWas(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := demoStore(t, data)
	if ssts, _ := filepath.Glob(filepath.Join(data, "*.sst")); len(ssts) != 0 {
		t.Fatalf("the demo's store has tables %v: the records are not only in its WAL", ssts)
	}
	before := storeState(t, data)
	first := map[string]string{}
	for round := 0; round < 2; round++ {
		for _, args := range readOnlyCommands(pid) {
			r := libos(t, "", append([]string{"--data", data}, args...)...)
			if r.code != 0 {
				t.Fatalf("libos %v: exit %d\n%s", args, r.code, r.stderr)
			}
			if after := storeState(t, data); !reflect.DeepEqual(before, after) {
				t.Fatalf("libos %v changed the store:\nbefore %q\nafter  %q", args, before, after)
			}
			key := strings.Join(args, " ")
			if round == 0 {
				first[key] = r.stdout
			} else if r.stdout != first[key] {
				t.Fatalf("libos %v printed another answer the second time:\n%s\n---\n%s", args, first[key], r.stdout)
			}
		}
	}
	if !strings.Contains(first["ps"], pid) || !strings.Contains(first["__complete events "], pid) ||
		!strings.Contains(first["events "+pid], "tool_result") || !strings.Contains(first["tools "+pid], `"same_value"`) {
		t.Fatalf("the records are not shown:\n%s\n%s", first["ps"], first["events "+pid])
	}
}

// "A command that only reads works on a store it cannot write: on a read-only mount
// (a bind mount in a mount namespace of the command's own, when the test runs as root
// and may mount), or on files and a directory without write permission (when it does
// not run as root, for whom permissions do not hold); it prints what it prints on a
// writable store."
func TestReadOnlyCommandsOnAReadOnlyStore(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := demoStore(t, data)
	want := map[string]string{}
	for _, args := range readOnlyCommands(pid) {
		r := libos(t, "", append([]string{"--data", data}, args...)...)
		if r.code != 0 {
			t.Fatalf("libos %v: exit %d\n%s", args, r.code, r.stderr)
		}
		want[strings.Join(args, " ")] = r.stdout
	}
	before := storeState(t, data)
	run := func(args []string) result {
		args = append([]string{"--data", data}, args...)
		if os.Geteuid() != 0 {
			return libos(t, "", args...)
		}
		return libosOverReadOnly(t, data, args...)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
			t.Skipf("no mount namespace here: %v %s", err, out)
		}
	} else {
		ents, _ := os.ReadDir(data)
		for _, e := range ents {
			os.Chmod(filepath.Join(data, e.Name()), 0o444)
		}
		os.Chmod(data, 0o555)
		t.Cleanup(func() { os.Chmod(data, 0o755) })
		before = storeState(t, data)
	}
	for _, args := range readOnlyCommands(pid) {
		r := run(args)
		if r.code != 0 {
			t.Fatalf("libos %v on a read-only store: exit %d\n%s", args, r.code, r.stderr)
		}
		if got := r.stdout; got != want[strings.Join(args, " ")] {
			t.Fatalf("libos %v on a read-only store printed\n%s\nwant\n%s", args, got, want[strings.Join(args, " ")])
		}
	}
	if after := storeState(t, data); !reflect.DeepEqual(before, after) {
		t.Fatalf("the read-only store changed:\nbefore %q\nafter  %q", before, after)
	}
}

// "A command that only reads, on a store directory that does not exist, prints what
// it prints on an empty store and does not create the directory; on a store of
// another format version it fails with the format error, exit 2, and changes
// nothing."
func TestReadOnlyCommandsOnMissingAndForeignStores(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "a", "store")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ps"}, {"ps", "--json"}, {"approvals"}} {
		want := libos(t, "", append(args, "--data", empty)...)
		got := libos(t, "", append(args, "--data", missing)...)
		if got.code != 0 || got.stdout != want.stdout || want.code != 0 {
			t.Fatalf("libos %v on a missing store: exit %d %q, on an empty one exit %d %q", args, got.code, got.stdout, want.code, want.stdout)
		}
	}
	if r := libos(t, "", "events", "pid_00000000000000000000000000000000", "--data", missing); r.code != 2 || !strings.Contains(r.stderr, "no process") {
		t.Fatalf("events of an unknown process in a missing store: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("a read-only command created the store's directory: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("a read-only command wrote into an empty directory: %v", ents)
	}

	foreign := filepath.Join(t.TempDir(), "store")
	echoCalls(t, foreign, "", 1, "x")
	db, err := pebble.Open(foreign, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("meta\x00format"), []byte("2"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := storeState(t, foreign)
	r := libos(t, "", "ps", "--data", foreign)
	if r.code != 2 || !strings.Contains(r.stderr, "format_unsupported") && !strings.Contains(r.stderr, "format version 2") {
		t.Fatalf("ps on a store of format 2: exit %d\n%s", r.code, r.stderr)
	}
	if after := storeState(t, foreign); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused read-only command changed the store:\nbefore %q\nafter  %q", before, after)
	}
}

// "While 'libos serve' holds the store, a command that only reads and finds no
// operator socket fails with the store in use (exit 2); once the server is killed
// (SIGKILL, nothing flushed), it shows every acknowledged change (a capability the
// operator granted through the server) and writes nothing."
func TestReadOnlyCommandsAfterAWriterCrashed(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	pid := echoCalls(t, data, "", 2, "x")
	srv := startLibos(t, nil, "--data", data, "serve", "--pid", pid)
	if _, ok := srv.stderr.waitFor(regexp.MustCompile(`serving an existing process`), 90*time.Second); !ok {
		t.Fatalf("serve did not start:\n%s", srv.stderr)
	}
	if r := libos(t, "", "grant", pid, "clock:now", "--data", data); r.code != 0 {
		t.Fatalf("grant through the server: exit %d\n%s", r.code, r.stderr)
	}
	socks, _ := filepath.Glob(filepath.Join(filepath.Dir(data), ".libos-run", "*"))
	if len(socks) != 1 {
		t.Fatalf("operator sockets: %v", socks)
	}
	if err := os.Remove(socks[0]); err != nil {
		t.Fatal(err)
	}
	if r := libos(t, "", "ps", "--data", data); r.code != 2 || !strings.Contains(r.stderr, "in use") {
		t.Fatalf("ps on a store a server holds, without its socket: exit %d\n%s", r.code, r.stderr)
	}
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.wait(t)
	before := storeState(t, data)
	r := libos(t, "", "ps", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "clock:now") {
		t.Fatalf("ps after the server was killed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := libos(t, "", "events", pid, "--verify", "--data", data); r.code != 0 || !strings.Contains(r.stdout, "capability_granted") {
		t.Fatalf("events after the server was killed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after := storeState(t, data); !reflect.DeepEqual(before, after) {
		t.Fatalf("a read-only command changed the crashed store:\nbefore %q\nafter  %q", before, after)
	}
}

// libosOverReadOnly runs the binary with args in a mount namespace of its own where dir is
// a read-only bind mount of itself, so that even root cannot write there. The mount lives
// in the namespace of the command and dies with it.
func libosOverReadOnly(t *testing.T, dir string, args ...string) result {
	t.Helper()
	script := `d=$1; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", dir, libosBin}, args...)...)
	cmd.Env = testEnv(t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}
