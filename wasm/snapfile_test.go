package wasm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// snapshotPrograms are run on an Engine that built its snapshot and on one that read it,
// and must answer the same: the prelude's globals, console output, the seeded
// Math.random, a syscall, JSON that reaches the plain-JSON check.
var snapshotPrograms = []string{
	`function run(a) { return a.x * 2; }`,
	`function run() { console.log("hi", [1, {a: 2}]); return Object.keys(globalThis).sort(); }`,
	`function run() { return [Math.random(), Math.random()]; }`,
	`async function run(_, libos) { return await libos.syscall("echo", {v: 1}); }`,
	`function run() { return typeof Date.now === "function" && (() => { try { Date.now(); return "ran"; } catch (e) { return e.name; } })(); }`,
}

// runAll runs snapshotPrograms on e and returns each result's value and console lines.
func runAll(t *testing.T, e *Engine) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range snapshotPrograms {
		res := mustRun(t, e, p, `{"x":21}`, echoSyscaller, Options{Seed: 7})
		line := append([]byte(nil), res.Value...)
		for _, l := range res.Logs {
			line = append(line, '\n')
			line = append(line, l.Message...)
		}
		out = append(out, line)
	}
	return out
}

// pooledMemory returns a copy of the whole memory of e's idle instance.
func pooledMemory(t *testing.T, e *Engine) []byte {
	t.Helper()
	in, err := e.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer e.put(context.Background(), in)
	mem, _ := in.mem.Read(0, in.mem.Size())
	return bytes.Clone(mem)
}

// snapfile.go: "a new process with a cache directory reads the snapshot the last one
// built instead". An Engine on a cache directory that holds the snapshot does not build
// it: its instance is byte for byte the instance that built it, and every program answers
// as it does there.
func TestSnapshotKeptForTheNextEngine(t *testing.T) {
	dir := t.TempDir()
	copyCompiled(t, dir)
	a := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
	if err := a.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.SnapshotLoaded() {
		t.Fatal("an empty cache directory gave a snapshot")
	}
	if _, err := os.Stat(a.snapKey.path(dir)); err != nil {
		t.Fatalf("the snapshot was not kept: %v", err)
	}
	built := pooledMemory(t, a)

	b := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
	if err := b.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !b.SnapshotLoaded() {
		t.Fatal("the kept snapshot was not used")
	}
	if b.snapFrom != a.snapFrom || !bytes.Equal(b.snap, a.snap) {
		t.Fatalf("the snapshot read (%d bytes from %#x) is not the one built (%d bytes from %#x)", len(b.snap), b.snapFrom, len(a.snap), a.snapFrom)
	}
	// Below the snapshot is the shadow stack, where the instance that built the state
	// still holds the dead frames of libos_prepare (the restore after its first call
	// clears them); from the snapshot on the two are the same, and below it the instance
	// made from the file is zero.
	read := pooledMemory(t, b)
	if len(read) != len(built) || !bytes.Equal(read[b.snapFrom:], built[a.snapFrom:]) {
		t.Fatalf("an instance made from the kept snapshot differs from the instance that built it (%d and %d bytes, first difference at %#x)", len(read), len(built), firstDiff(read, built))
	}
	if !allZero(read[:b.snapFrom]) {
		t.Fatal("an instance made from the kept snapshot has bytes below it")
	}
	want, got := runAll(t, a), runAll(t, b)
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("program %d: from the kept snapshot %q, from the built one %q", i, got[i], want[i])
		}
	}
	// After a call each is restored to the whole snapshot image (ABI.md, "The snapshot").
	if read, built := pooledMemory(t, b), pooledMemory(t, a); !bytes.Equal(read, built) {
		t.Fatalf("after their calls the two instances differ (first difference at %#x)", firstDiff(read, built))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// copyCompiled links the compiled guest of the shared test cache into dir, so that a
// test of the snapshot file does not compile the guest again.
func copyCompiled(t *testing.T, dir string) {
	t.Helper()
	hostTestEngine(t) // the shared cache holds the compiled guest once an Engine used it
	src := hostTestCacheDir(t)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		if !d.IsDir() || d.Name() == snapDirPrefix+wazeroVersion() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(src, d.Name()))
		if err := os.MkdirAll(filepath.Join(dir, d.Name()), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.Link(filepath.Join(src, d.Name(), f.Name()), filepath.Join(dir, d.Name(), f.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// snapfile.go: "its SHA-256 over everything before it must match, so a truncated,
// damaged or foreign file is never loaded. Any mismatch, or any error reading it, means
// a fresh prepare, whose snapshot then replaces the file." Each file below is put where
// the Engine looks; the ones made for another key carry a marker in their snapshot, which
// must not reach the Engine's memory.
func TestDamagedOrStaleSnapshotIsNeverUsed(t *testing.T) {
	dir := t.TempDir()
	copyCompiled(t, dir)
	a := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
	if err := a.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := a.snapKey.path(dir)
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	marked := bytes.Clone(a.snap)
	copy(marked[len(marked)/2:], marker)
	foreign := func(change func(*snapKey)) []byte {
		k := a.snapKey
		change(&k)
		return encodeSnapshot(k, a.snapFrom, marked)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		return b
	}
	cases := []struct {
		name string
		file []byte
	}{
		{"empty", []byte{}},
		{"truncated", good[:len(good)/2]},
		{"without its checksum", good[:len(good)-32]},
		{"a byte longer", append(bytes.Clone(good), 0)},
		{"a snapshot byte flipped", flip(len(good) / 2)},
		{"a key byte flipped", flip(len(snapMagic) + 3)},
		{"the checksum flipped", flip(len(good) - 1)},
		{"another format", append([]byte("libos snapshot 9"), good[len(snapMagic):]...)},
		{"another guest", foreign(func(k *snapKey) { k.guestSHA[0] ^= 1 })},
		{"another memory cap", foreign(func(k *snapKey) { k.maxMemory += pageSize })},
		{"another wazero", foreign(func(k *snapKey) { k.wazero = "v0.0.1" })},
		{"past the memory cap", func() []byte {
			return encodeSnapshot(a.snapKey, uint32(a.maxMemory)-pageSize, marked)
		}()},
		{"the right key, marked", encodeSnapshot(a.snapKey, a.snapFrom, marked)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(p, c.file, 0o600); err != nil {
				t.Fatal(err)
			}
			b := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
			if err := b.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c.name == "the right key, marked" {
				// The control: a file for this key whose checksum matches is read, so
				// the cases above are refused for what they change, not for the marker.
				if !b.SnapshotLoaded() || !bytes.Contains(b.snap, marker) {
					t.Fatal("a well-formed snapshot for this key was not read")
				}
				return
			}
			if b.SnapshotLoaded() || bytes.Contains(b.snap, marker) {
				t.Fatal("the file was used")
			}
			if got := runAll(t, b); !bytes.Equal(got[0], []byte("42")) {
				t.Fatalf("the freshly prepared engine answers %q", got[0])
			}
			// The fresh prepare replaced the file with a good one.
			c2 := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
			if err := c2.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !c2.SnapshotLoaded() || !bytes.Equal(c2.snap, b.snap) {
				t.Fatal("the refused file was not replaced by the fresh snapshot")
			}
		})
	}
	t.Run("a directory", func(t *testing.T) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		b := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
		if got := runAll(t, b); b.SnapshotLoaded() || !bytes.Equal(got[0], []byte("42")) {
			t.Fatalf("loaded %v, answered %q", b.SnapshotLoaded(), got[0])
		}
	})
}

// The key names the file, so snapshots for different guests, caps and wazero versions
// live side by side instead of replacing each other.
func TestSnapshotPathsDifferByKey(t *testing.T) {
	k, ok := guestKey(builtGuest.SHA256, DefaultMaxMemory)
	if !ok {
		t.Fatalf("no key for the embedded guest %q", builtGuest.SHA256)
	}
	seen := map[string]string{k.path("d"): "base"}
	for name, change := range map[string]func(*snapKey){
		"guest":   func(k *snapKey) { k.guestSHA[31] ^= 1 },
		"cap":     func(k *snapKey) { k.maxMemory *= 2 },
		"version": func(k *snapKey) { k.wazero += "x" },
	} {
		k2 := k
		change(&k2)
		if prev, dup := seen[k2.path("d")]; dup {
			t.Errorf("another %s has the path of %s", name, prev)
		}
		seen[k2.path("d")] = name
	}
	if _, ok := guestKey("not hex", DefaultMaxMemory); ok {
		t.Error("a key was made from a guest hash that is not one")
	}
}

// A command must not fail for want of a cache (cmd/libos, OnCacheUnusable), and wazero
// fails the compile on an entry it cannot read instead of compiling: NewEngine replaces
// such an entry with a fresh compile (engine.go, replaceCacheEntry), so that this Engine
// and every later one start.
func TestDamagedCompiledEntryIsReplaced(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"machine code flipped", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			copyCompiled(t, dir)
			// Every entry of this wazero is damaged (the shared cache holds older guests'
			// too); each is a fresh file, so the shared cache's own are left alone.
			entries, _ := filepath.Glob(filepath.Join(dir, "wazero-"+wazeroVersion()+"-*", "*"))
			if len(entries) == 0 {
				t.Fatal("no compiled guest to damage")
			}
			good := map[string][]byte{}
			for _, p := range entries {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				good[p] = b
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, damage.do(bytes.Clone(b)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			e := newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
			if got := runAll(t, e); !bytes.Equal(got[0], []byte("42")) {
				t.Fatalf("the Engine answers %q", got[0])
			}
			replaced := 0
			for p, b := range good {
				if now, err := os.ReadFile(p); err == nil && bytes.Equal(now, b) {
					replaced++
				}
			}
			if replaced != 1 {
				t.Fatalf("%d damaged entries were replaced by a fresh compile, want the guest's one", replaced)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".recompile-*")); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
			// The next Engine reads the replaced entry.
			newHostTestEngine(t, Config{CacheDir: dir, PoolSize: 1})
		})
	}
}
