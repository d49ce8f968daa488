//go:build linux

package wasm

import (
	"path/filepath"
	"testing"

	"github.com/agentlibos/libos/internal/dirwatch"
)

// Config.CacheDir: "The compile of the guest (in NewEngine, or with Lazy at the first
// call) creates the directory if missing, proves a file can be written in it ... and
// opens the cache; before it, the directory is not touched." A lazy engine's NewEngine
// creates nothing in its cache directory, nor the directory when it is missing, not
// even a probe file removed at once; its first call probes the directory once and
// writes the cache.
func TestALazyEngineTouchesItsCacheDirOnlyAtItsCompile(t *testing.T) {
	for _, missing := range []bool{true, false} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "cache")
		if !missing {
			dir = parent
		}
		w, err := dirwatch.Watch(parent)
		if err != nil {
			t.Fatal(err)
		}
		e := newHostTestEngine(t, Config{CacheDir: dir, Lazy: true, PoolSize: 1})
		events, err := w.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 0 {
			t.Fatalf("missing %v: a lazy NewEngine touched its cache directory: %v", missing, events)
		}

		if w, err = dirwatch.Watch(parent); err != nil {
			t.Fatal(err)
		}
		checkHealthy(t, e)
		if events, err = w.Stop(); err != nil {
			t.Fatal(err)
		}
		if missing {
			if len(events) == 0 || events[0] != (dirwatch.Event{Op: dirwatch.Create, Path: dir}) {
				t.Errorf("the first call did not make the missing cache directory: %v", events)
			}
		} else if n := dirwatch.CountCreated(events, ".probe-"); n != 1 {
			t.Errorf("the first call probed the cache directory %d times, want 1: %v", n, events)
		}
	}
}
