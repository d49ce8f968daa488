package dirstate

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// "two descriptions taken before and after are equal exactly when nothing in the
// directory was written, created, renamed or removed": reading leaves it equal; a
// rewrite of the same bytes (a new time), a change of content at the same time, a new
// file and a removed one each change it.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a")
	if err := os.WriteFile(f, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(1_700_000_000, 0)
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	base := mustOf(t, dir)
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	if got := mustOf(t, dir); !reflect.DeepEqual(got, base) {
		t.Fatalf("reading changed the description:\n%q\n%q", base, got)
	}
	for name, change := range map[string]func(){
		"the same bytes written again": func() { os.WriteFile(f, []byte("one"), 0o600) },
		"other bytes at the same time": func() { os.WriteFile(f, []byte("two"), 0o600); os.Chtimes(f, old, old) },
		"a new file":                   func() { os.WriteFile(filepath.Join(dir, "b"), nil, 0o600) },
		"a removed file":               func() { os.Remove(f) },
	} {
		before := mustOf(t, dir)
		change()
		if got := mustOf(t, dir); reflect.DeepEqual(got, before) {
			t.Errorf("%s left the description as it was: %q", name, got)
		}
	}
	if _, err := Of(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory was described")
	}
}

func mustOf(t *testing.T, dir string) []string {
	t.Helper()
	s, err := Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
