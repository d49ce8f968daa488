package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFiles returns the sizes of the WAL files in dir on fs.
func walFiles(t *testing.T, fs vfs.FS, dir string) map[string]int64 {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") {
			continue
		}
		fi, err := fs.Stat(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = fi.Size()
	}
	return out
}

// "A sync that only overwrote blocks inside the file flushes just those blocks"
// (walfs.go): on the real disk, from a fresh store's first write on, a synced write
// lands inside the WAL file's size, which the zeros written ahead of it set, so the
// sync never has to commit a new size.
func TestWALSyncsOverwriteInsideTheFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAppend(t, s, "p", "note", `{"n":0}`)
	before := walFiles(t, vfs.Default, dir)
	if len(before) != 1 {
		t.Fatalf("want one WAL file, got %v", before)
	}
	for i := 1; i <= 20; i++ {
		mustAppend(t, s, "p", "note", fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 500)))
	}
	after := walFiles(t, vfs.Default, dir)
	for name, size := range before {
		if size < walAheadMin {
			t.Fatalf("WAL %s is %d bytes after the first synced write: no zeros ahead of the data", name, size)
		}
		if after[name] != size {
			t.Fatalf("WAL %s grew from %d to %d bytes over 20 synced appends of about 10 KB: the syncs grew the file", name, size, after[name])
		}
	}
}

// "Nothing acknowledged is lost", with the zeros after a WAL's data: a crash leaves
// the most recent WAL with a zeroed tail, which Pebble reads as its end, and a store
// reopened after a crash, written to and crashed again, still recovers every
// acknowledged write (and a whole log that verifies).
func TestWALZeroTailSurvivesRepeatedCrashes(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := vfs.FS(mem)
	acked := 0
	for round := range 4 {
		s, err := Open("/data", Options{FS: fs, Now: fixedClock()})
		if err != nil {
			t.Fatalf("round %d: reopen after crash: %v", round, err)
		}
		evs, err := s.Events("p", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != acked {
			t.Fatalf("round %d: %d events after the crash, %d were acknowledged", round, len(evs), acked)
		}
		if err := s.Verify("p"); acked > 0 && err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Enough to pass walAheadMin, so that the tail is zeros written by a later extension.
		for i := range 150 {
			data := json.RawMessage(fmt.Sprintf(`{"round":%d,"i":%d,"pad":%q}`, round, i, strings.Repeat("y", 400)))
			if _, err := s.Append(ctx, "p", "note", data); err != nil {
				t.Fatal(err)
			}
			acked++
		}
		for name, size := range walFiles(t, mem, "/data") {
			if size < walAheadMin {
				t.Fatalf("round %d: WAL %s is %d bytes: no zeros ahead of the data", round, name, size)
			}
		}
		// The crash: the clone keeps what was synced, and the WAL it holds has no
		// EOF trailer. Closing the store afterwards touches only the original.
		mem = mem.CrashClone(vfs.CrashCloneCfg{})
		fs = mem
		s.Close()
	}
}

// "A WAL created after the first one of a Store is written with zeros at once, twice
// as far as the previous WAL's log reached" (walfs.go), and "nothing acknowledged is
// lost": once memtables fill, each WAL after the first holds zeros before its first
// write, the syncs of its whole log stay inside them (the file never grows under
// them), and a crash then loses no acknowledged write.
func TestWALAfterTheFirstIsZeroedAtCreation(t *testing.T) {
	const memtable = 512 << 10
	mem := vfs.NewCrashableMem()
	s, err := Open("/data", Options{FS: mem, Now: fixedClock(), tune: func(o *pebble.Options) {
		o.MemTableSize = memtable
	}})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	appendN := func(n int) {
		for i := range n {
			data := json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("z", 900)))
			if _, err := s.Append(ctx, "p", "note", data); err != nil {
				t.Fatal(err)
			}
			acked++
		}
	}
	appendN(1)
	first := walFiles(t, mem, "/data")
	if len(first) != 1 {
		t.Fatalf("want one WAL file after the first write, got %v", first)
	}
	// Each WAL after the first, at its size when first seen (it is created with
	// its zeros, before Pebble writes it).
	seen := map[string]int64{}
	for len(seen) < 4 {
		if acked > 20000 {
			t.Fatalf("only %d WALs after the first in 20,000 appends of about 1 KB", len(seen))
		}
		appendN(5)
		for name, size := range walFiles(t, mem, "/data") {
			if _, ok := first[name]; ok {
				continue
			}
			old, ok := seen[name]
			if !ok {
				if size < 2*walAheadMin {
					t.Fatalf("WAL %s after the first is %d bytes when it appears: no zeros written at its creation", name, size)
				}
				seen[name] = size
				continue
			}
			if size != old {
				t.Fatalf("WAL %s grew from %d to %d bytes under its log: the zeros written at its creation were too few", name, old, size)
			}
		}
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s, err = Open("/data", Options{FS: crashed, Now: fixedClock()})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	evs, err := s.Events("p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != acked {
		t.Fatalf("%d events after the crash, %d were acknowledged", len(evs), acked)
	}
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}
