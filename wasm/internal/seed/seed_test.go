package seed

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const entryPath = "wazero-v1-amd64-linux/0123abcd"

// makePack writes a seed in the format of data/seed.pack (seed.go).
func makePack(guest string, entries map[string]string) string {
	var h, body strings.Builder
	h.WriteString(packMagic + "\n")
	if guest != "" {
		fmt.Fprintf(&h, "guest %s\n", guest)
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&h, "entry %s %d\n", p, len(entries[p]))
		body.WriteString(entries[p])
	}
	return h.String() + "\n" + body.String()
}

func seedPack(t *testing.T, guest string) pack {
	t.Helper()
	p, err := parse(makePack(guest, map[string]string{entryPath: "machine code", "libos-snapshot-v1/ff": "snapshot"}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Rule (doc.go): "installs them into a cache directory that lacks them".
func TestInstallWritesMissingEntries(t *testing.T) {
	dir := t.TempDir()
	ok, err := install(seedPack(t, "abc"), dir, "abc")
	if err != nil || !ok {
		t.Fatalf("install: %v %v", ok, err)
	}
	for p, want := range map[string]string{entryPath: "machine code", "libos-snapshot-v1/ff": "snapshot"} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(got) != want {
			t.Fatalf("entry %s: %q %v", p, got, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", "*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// Rule (seed.go): "Entries already in dir are left alone".
func TestInstallKeepsExistingEntries(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, filepath.FromSlash(entryPath))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("compiled here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := install(seedPack(t, "abc"), dir, "abc"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "compiled here" {
		t.Fatalf("an existing entry was replaced: %q", got)
	}
}

// Rule (doc.go): "Install also writes nothing when the seed records a guest other than
// the one embedded."
func TestInstallRefusesAnotherGuest(t *testing.T) {
	dir := t.TempDir()
	ok, err := install(seedPack(t, "abc"), dir, "def")
	if err != nil || ok {
		t.Fatalf("install for another guest: %v %v", ok, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("wrote %v for another guest", ents)
	}
}

// An unwritable cache directory is an error the caller sees, not a panic.
func TestInstallUnwritableDir(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := install(seedPack(t, "abc"), f, "abc"); err == nil {
		t.Fatal("installing under a regular file succeeded")
	}
}

// The seed's format (seed.go): a header naming the guest and each entry with its
// length, then the entries' bytes in that order. Anything else is refused, and a path
// that would leave the cache directory is never an entry.
func TestParse(t *testing.T) {
	p, err := parse(makePack("abc", map[string]string{"a/x": "12345", "b/y": ""}))
	if err != nil || p.guest != "abc" || len(p.entries) != 2 || p.entries[0] != (entry{"a/x", "12345"}) || p.entries[1] != (entry{"b/y", ""}) {
		t.Fatalf("parse: %+v %v", p, err)
	}
	for _, bad := range []string{
		"",
		"libos-seed 2\nguest abc\n\n",
		packMagic + "\nentry a 1\n\nx", // no guest
		packMagic + "\nguest abc\nentry a 2\n\nx",            // shorter than its length
		packMagic + "\nguest abc\nentry a 1\n\nxy",           // bytes after the last entry
		packMagic + "\nguest abc\nentry ../a 1\n\nx",         // leaves the directory
		packMagic + "\nguest abc\nentry /a 1\n\nx",           // absolute
		packMagic + "\nguest abc\nentry a -1\n\n",            // negative length
		packMagic + "\nguest abc\nentry a 1 extra\n\nx",      // malformed line
		packMagic + "\nguest abc\nguest def\nentry a 1\n\nx", // two guests
		packMagic + "\nguest abc\nentry a 1",                 // no end of header
	} {
		if p, err := parse(bad); err == nil {
			t.Errorf("parse(%q) = %+v, want an error", bad, p)
		}
	}
}
