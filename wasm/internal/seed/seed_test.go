package seed

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

const entry = "wazero-v1-amd64-linux/0123abcd"

func seedFS(guest string) fstest.MapFS {
	return fstest.MapFS{
		guestFile: {Data: []byte(guest + "\n")},
		entry:     {Data: []byte("machine code")},
	}
}

// Rule (doc.go): "installs them into a cache directory that lacks them".
func TestInstallWritesMissingEntries(t *testing.T) {
	dir := t.TempDir()
	ok, err := install(seedFS("abc"), dir, "abc")
	if err != nil || !ok {
		t.Fatalf("install: %v %v", ok, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(entry)))
	if err != nil || string(got) != "machine code" {
		t.Fatalf("entry: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, guestFile)); !os.IsNotExist(err) {
		t.Fatalf("the guest record is not a cache entry and must not be written: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", "*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// Rule (seed.go): "Entries already in dir are left alone".
func TestInstallKeepsExistingEntries(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, filepath.FromSlash(entry))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("compiled here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := install(seedFS("abc"), dir, "abc"); err != nil {
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
	ok, err := install(seedFS("abc"), dir, "def")
	if err != nil || ok {
		t.Fatalf("install for another guest: %v %v", ok, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("wrote %v for another guest", ents)
	}
	if ok, err := install(fstest.MapFS{entry: {Data: []byte("x")}}, dir, "def"); ok || err != nil {
		t.Fatalf("a seed without its guest record was used: %v %v", ok, err)
	}
}

// An unwritable cache directory is an error the caller sees, not a panic.
func TestInstallUnwritableDir(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := install(seedFS("abc"), f, "abc"); err == nil {
		t.Fatal("installing under a regular file succeeded")
	}
}
