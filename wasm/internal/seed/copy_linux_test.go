package seed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inExecutable is in the test binary's read-only data, as an embedded seed is in libos's.
const inExecutable = "This string is a part of the executable's file, mapped into memory as an embedded seed is: " +
	"copyFromExecutable must find it in /proc/self/maps and have the kernel copy it from the file. 0123456789abcdef"

// copyFromExecutable (copy_linux.go): the bytes of an embedded string are copied from
// the executable's file, to the destination's current position, and come out the same;
// a string that is not in the executable's mapping is refused with nothing written, and
// writeAtomic then writes it itself.
func TestCopyFromExecutable(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("prefix:"); err != nil {
		t.Fatal(err)
	}
	if !copyFromExecutable(f, inExecutable) {
		t.Fatal("an embedded string was not found in the executable")
	}
	f.Close()
	if got, _ := os.ReadFile(f.Name()); string(got) != "prefix:"+inExecutable {
		t.Fatalf("copied %q", got)
	}

	onHeap := strings.Repeat("not in the executable ", 10)
	g, err := os.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if copyFromExecutable(g, onHeap) {
		t.Fatal("a string on the heap was copied from the executable")
	}
	if fi, _ := g.Stat(); fi.Size() != 0 {
		t.Fatalf("a refused copy wrote %d bytes", fi.Size())
	}

	for name, data := range map[string]string{"c/x": inExecutable, "d/y": onHeap} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := writeAtomic(data, p); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != data {
			t.Fatalf("writeAtomic %s wrote %q", name, got)
		}
	}
}
