package wasm

import (
	"context"
	"io/fs"
	"path"
	"path/filepath"
	"testing"

	"github.com/agentlibos/libos/wasm/internal/seed"
)

// Rule (internal/seed): a binary built by 'make build' carries the guest compiled for its
// platform, and a first run with an empty cache directory "reads machine code instead of
// compiling the guest". The seed's entry must be under the key wazero looks up (a hash of
// the guest, the CPU features): after an Engine starts on an empty directory, every entry
// there has the name of one of the seed's. (A test binary reports its wazero version as
// "dev", so wazero looks in another directory than a release binary and compiles anew:
// what this checks is the key.) Run with -tags libos_seed after scripts/build-seeded.sh;
// without a seed there is nothing to check.
func TestSeedIsWhatWazeroLooksUp(t *testing.T) {
	entries := seed.Entries()
	if len(entries) == 0 {
		t.Skip("no seed in this build (scripts/build-seeded.sh, -tags libos_seed)")
	}
	keys := map[string]bool{}
	for _, p := range entries {
		keys[path.Base(p)] = true
	}
	dir := t.TempDir()
	e, err := NewEngine(context.Background(), Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), `function run() { return 1; }`, nil, nil, Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	e.Close(context.Background())
	var got []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(got) == 0 {
		t.Fatal("the cache directory is empty")
	}
	for _, p := range got {
		if !keys[path.Base(p)] {
			t.Errorf("wazero keeps the guest under %s, which is not one of the seed's entries %v", p, entries)
		}
	}
}
