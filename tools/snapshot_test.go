package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// The sandbox keeps the snapshot of its prepared state beside the compilation cache and
// a new process reads it instead of preparing (wasm/snapfile.go): "a validation from the
// persisted snapshot gives the same report byte for byte". Every candidate of the corpus
// is validated by an Engine that prepared the state itself and by one that read it.
func TestValidationFromKeptSnapshotIsTheSame(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no candidates: %v", err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	reports := func() ([][]byte, bool) {
		sb, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: dir, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close(ctx)
		v := tools.NewValidator(sb, tools.ValidatorConfig{Clock: func() time.Time { return tools.ValidationTime }, Parallel: 1})
		var out [][]byte
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tools.ParseCandidate(data)
			if err != nil {
				continue // a file the validator never sees as a candidate
			}
			b, _ := json.Marshal(v.Validate(ctx, c))
			out = append(out, b)
		}
		return out, sb.SnapshotLoaded()
	}
	built, loaded := reports()
	if loaded {
		t.Fatal("an empty cache directory gave a snapshot")
	}
	read, loaded := reports()
	if !loaded {
		t.Fatal("the second Engine prepared the state again instead of reading it")
	}
	if len(read) != len(built) || len(built) == 0 {
		t.Fatalf("%d and %d reports", len(built), len(read))
	}
	for i := range built {
		if !bytes.Equal(built[i], read[i]) {
			t.Errorf("reports differ\nprepared: %s\nread:     %s", built[i], read[i])
		}
	}
}
