//go:build linux

package dirwatch

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// "records every entry created in or removed from a directory tree ... a file created
// and removed at once ... its creation is an event here", and "a directory that appears
// later is watched ..., and what it holds by then is recorded as created": a probe file
// made and removed at once, an entry moved out and one moved in are recorded in order; a
// tree of new directories with a file at the bottom is recorded whole, each entry once,
// however far the watcher was behind; nothing outside the tree is.
func TestWatchRecordsEveryCreateAndRemove(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	old := filepath.Join(root, "old")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Watch(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(old, ".probe-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "out"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(old, "out"), filepath.Join(outside, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "in"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(outside, "in"), filepath.Join(old, "in")); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "entry"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	events, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Create, f.Name()},
		{Remove, f.Name()},
		{Create, filepath.Join(old, "out")},
		{Remove, filepath.Join(old, "out")},
		{Create, filepath.Join(old, "in")},
		{Create, filepath.Join(root, "a")},
		{Create, filepath.Join(root, "a", "b")},
		{Create, deep},
		{Create, filepath.Join(deep, "entry")},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events:\n%v\nwant\n%v", events, want)
	}
	if got := Created(events); len(got) != 7 || got[0] != f.Name() {
		t.Errorf("Created = %v", got)
	}
	// The probe-like file was created once, and so was out; nothing else starts so.
	if n := CountCreated(events, ".probe-"); n != 1 {
		t.Errorf("CountCreated(.probe-) = %d, want 1", n)
	}
	if n := CountCreated(events, "ou"); n != 1 {
		t.Errorf("CountCreated(ou) = %d, want 1", n)
	}
}

// A tree where nothing happens gives no events.
func TestWatchOfAQuietTreeRecordsNothing(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Watch(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(root, "f")); err != nil {
		t.Fatal(err)
	}
	events, err := w.Stop()
	if err != nil || len(events) != 0 {
		t.Errorf("Stop = %v, %v; want no events", events, err)
	}
}
