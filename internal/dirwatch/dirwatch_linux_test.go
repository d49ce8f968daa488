//go:build linux

package dirwatch

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
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

// "a tree of new directories ... is recorded whole, each entry once, however far the
// watcher was behind": the kernel's events for directories a scan has already found
// (here handed to the watcher after the whole tree was made, as a watcher that fell
// behind sees them) record nothing more, and do not scan those directories again.
func TestEventsForScannedDirectoriesRecordNothingMore(t *testing.T) {
	root := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	w := &Watcher{fd: fd, dirs: map[int]string{}, scanned: map[string]bool{}}
	if err := w.add(root); err != nil {
		t.Fatal(err)
	}
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "a", "b"), filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(c, 0o755); err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(c, "entry")
	if err := os.WriteFile(entry, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wdOf := func(dir string) int {
		w.mu.Lock()
		defer w.mu.Unlock()
		for wd, d := range w.dirs {
			if d == dir {
				return wd
			}
		}
		t.Fatalf("%s is not watched", dir)
		return 0
	}
	dirCreated := uint32(unix.IN_CREATE | unix.IN_ISDIR)
	w.handle(wdOf(root), dirCreated, "a") // scans a: b, c and entry
	w.handle(wdOf(a), dirCreated, "b")    // the events of the creations the scan found
	w.handle(wdOf(b), dirCreated, "c")
	w.handle(wdOf(c), unix.IN_CREATE, "entry")
	want := []Event{{Create, a}, {Create, b}, {Create, c}, {Create, entry}}
	if !reflect.DeepEqual(w.events, want) {
		t.Errorf("events:\n%v\nwant\n%v", w.events, want)
	}
	if w.err != nil {
		t.Errorf("err = %v", w.err)
	}
	// After the events came, a new creation in c is an event again.
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	w.handle(wdOf(c), unix.IN_DELETE, "entry")
	w.handle(wdOf(c), unix.IN_CREATE, "entry")
	if got := w.events[len(w.events)-2:]; !reflect.DeepEqual(got, []Event{{Remove, entry}, {Create, entry}}) {
		t.Errorf("last events = %v", got)
	}
}
