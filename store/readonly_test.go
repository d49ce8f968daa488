package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentlibos/libos/internal/dirstate"
	"github.com/cockroachdb/pebble/v2"
)

// dirState describes a store directory (dirstate.Of): what a read-only open must leave
// as it was.
func dirState(t testing.TB, dir string) []string {
	t.Helper()
	st, err := dirstate.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sameState(t testing.TB, what string, before, after []string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store directory:\nbefore %q\nafter  %q", what, before, after)
	}
}

// copyDir copies the regular files of src into a new directory dst: the files as they
// are on the disk at that moment, which is what a crash of the writer leaves.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeStore makes a store in dir with n events and n kv entries of process "p", every
// one synced, and leaves it open (the caller closes it, or copies its files first).
func writeStore(t testing.TB, dir string, n int) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := s.Update(ctx, func(tx *Tx) error {
			if _, err := tx.Append("p", "note", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				return err
			}
			return tx.KVPut("p", fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// checkRecords reads back what writeStore wrote.
func checkRecords(t testing.TB, s *Store, n int) {
	t.Helper()
	evs, err := s.Events("p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("%d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if string(e.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("event %d: %s", e.Seq, e.Data)
		}
	}
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.KVGet("p", fmt.Sprintf("k%d", n-1)); err != nil || string(v) != fmt.Sprint(n-1) {
		t.Fatalf("kv: %q, %v", v, err)
	}
}

// wantReadOnly checks that every kind of write on s is refused with read_only.
func wantReadOnly(t *testing.T, s *Store) {
	t.Helper()
	for name, write := range map[string]func() error{
		"Update":         func() error { return s.Update(ctx, func(tx *Tx) error { return nil }) },
		"UpdateDeferred": func() error { return s.UpdateDeferred(ctx, func(tx *Tx) error { return nil }) },
		"UpdateMeanwhile": func() error {
			return s.UpdateMeanwhile(ctx, func(tx *Tx) error { return nil }, func() {})
		},
		"UpdateProcess": func() error { return s.UpdateProcess(ctx, "p", func(tx *Tx) error { return nil }) },
		"Append":        func() error { _, err := s.Append(ctx, "p", "note", json.RawMessage(`{}`)); return err },
		"KVPut":         func() error { return s.KVPut(ctx, "p", "k", []byte("v")) },
		"Charge":        func() error { _, err := s.Charge(ctx, "p", "b", 1, 10); return err },
		"Secret":        func() error { _, err := s.Secret(ctx, "s"); return err },
		"ApplyReplicated": func() error {
			_, err := s.ApplyReplicated(ctx, Replicated{PID: "p", Pos: 1})
			return err
		},
	} {
		err := write()
		wantCode(t, err, CodeReadOnly)
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("%s: %v is not ErrReadOnly", name, err)
		}
	}
	// Nothing deferred waits, so a Sync has nothing to do.
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// "A read-only open of the store reads every acknowledged record and writes nothing
// into the directory: not a record, not one of Pebble's files (MANIFEST, WAL,
// OPTIONS), not the LOCK file's time; a leftover temporary file that a writable open
// would remove stays. Every write is refused with read_only."
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := writeStore(t, dir, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a writer that stopped while writing an OPTIONS file leaves.
	if err := os.WriteFile(filepath.Join(dir, "000099.dbtmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	for i := 0; i < 2; i++ {
		ro, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, ro, 20)
		wantReadOnly(t, ro)
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		sameState(t, "a read-only open", before, dirState(t, dir))
	}
	// The writable open does write (the test above can fail).
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, s, 20)
	s.Close()
	if reflect.DeepEqual(before, dirState(t, dir)) {
		t.Fatal("a writable open left the directory as it was: the comparison sees nothing")
	}
}

// "A store whose writer crashed (its acknowledged writes only in the WAL) opens
// read-only with every acknowledged record, replayed in memory, and stays as the
// crash left it; the writable open after it recovers the same records."
func TestReadOnlyOpenAfterCrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	s := writeStore(t, dir, 30)
	defer s.Close()
	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed) // the files as a crash would leave them: nothing flushed
	before := dirState(t, crashed)
	ro, err := Open(crashed, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, ro, 30)
	ro.Close()
	sameState(t, "a read-only open of a crashed store", before, dirState(t, crashed))
	rw, err := Open(crashed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	checkRecords(t, rw, 30)
}

// "A missing or empty directory opens read-only as an empty store and is left as it
// is: the missing one is not created."
func TestReadOnlyOpenMissingOrEmpty(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "a", "b")
	empty := t.TempDir()
	for _, dir := range []string{missing, empty} {
		s, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if ps, err := s.Processes(); err != nil || len(ps) != 0 {
			t.Fatalf("processes of an empty store: %v, %v", ps, err)
		}
		if _, err := s.Process("pid_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a process of an empty store: %v", err)
		}
		wantReadOnly(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("the missing directory was created: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("the empty directory holds %v", ents)
	}
	// A file where the directory should be is an io error, as for the writable open.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, err := Open(file, Options{ReadOnly: true})
	wantCode(t, err, CodeIO)
}

// "A read-only open refuses what the writable one refuses, with the same codes: a
// format it does not know, data without a format version. A store without any key
// (its format version never written) is an empty store."
func TestReadOnlyOpenFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}, FormatMajorVersion: pebbleFormat})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a store without keys: %v", err)
	}
	s.Close()
	for _, tc := range []struct{ name, key, v string }{
		{"an unknown newer format", "meta\x00format", "2"},
		{"an unreadable format", "meta\x00format", "one"},
		{"data without a format version", "meta\x00other", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}, FormatMajorVersion: pebbleFormat})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte(tc.key), []byte(tc.v), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			db.Close()
			before := dirState(t, dir)
			_, err = Open(dir, Options{ReadOnly: true})
			wantCode(t, err, CodeFormatUnsupported)
			sameState(t, "a refused read-only open", before, dirState(t, dir))
			// The directory is released: it opens again.
			_, err = Open(dir, Options{ReadOnly: true})
			wantCode(t, err, CodeFormatUnsupported)
		})
	}
}

// "A Store of this process holding a directory, read-only or not, makes another open
// of it in this process fail with in_use (a second lock of the same process would not
// conflict with the first, and closing it would release the first); once closed, the
// directory opens again."
func TestReadOnlyOpenInUseInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := writeStore(t, dir, 1)
	_, err := Open(dir, Options{ReadOnly: true})
	wantCode(t, err, CodeInUse)
	s.Close()
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	wantCode(t, err, CodeInUse)
	_, err = Open(dir, Options{ReadOnly: true})
	wantCode(t, err, CodeInUse)
	ro.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("after the read-only store closed: %v", err)
	}
	s.Close()
}

const readOnlyChildEnv = "LIBOS_STORE_READONLY_CHILD"

// TestReadOnlyChild is the child side of TestReadOnlyOpenOnReadOnlyFS: it opens the
// store in its directory read-only and prints what it reads.
func TestReadOnlyChild(t *testing.T) {
	dir := os.Getenv(readOnlyChildEnv)
	if dir == "" {
		t.Skip("child process of TestReadOnlyOpenOnReadOnlyFS")
	}
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkRecords(t, s, 10)
	_, err = s.Append(ctx, "p", "note", json.RawMessage(`{}`))
	wantCode(t, err, CodeReadOnly)
	fmt.Println("read-only child: ok")
}

// "A read-only open works on a store the process cannot write: a read-only file
// system (a read-only bind mount, in a mount namespace of the child's own, when the
// test runs as root and may mount), or files and a directory without write
// permission (when it does not run as root, for whom permissions do not hold)."
func TestReadOnlyOpenOnReadOnlyFS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := writeStore(t, dir, 10)
	s.Close()
	before := dirState(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("no unshare(1) to make a read-only mount")
		}
		// The mount lives in the child's namespace and dies with it.
		script := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" -test.run='^TestReadOnlyChild$' -test.v`
		cmd = exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", dir, exe)
		if out, err := exec.Command(unshare, "-m", "true").CombinedOutput(); err != nil {
			t.Skipf("no mount namespace here: %v %s", err, out)
		}
	} else {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.Chmod(filepath.Join(dir, e.Name()), 0o444)
		}
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		before = dirState(t, dir)
		cmd = exec.Command(exe, "-test.run=^TestReadOnlyChild$", "-test.v")
	}
	cmd.Env = append(os.Environ(), readOnlyChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "read-only child: ok") {
		t.Fatalf("the child did not run:\n%s", out)
	}
	sameState(t, "a read-only open on a read-only file system", before, dirState(t, dir))
}
