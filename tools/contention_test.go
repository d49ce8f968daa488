package tools_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// Rule: "validation uses a deterministic budget counted in guest work, identical on every
// machine, so a verdict never depends on machine load ... A test validates the candidate
// corpus under heavy artificial CPU contention and gets byte-identical reports."
//
// The corpus is validated once on a quiet process, then again while four busy goroutines
// per core spin, another forces garbage collections and two more keep CPU-bound guests
// running on the same sandbox; every report must be the same bytes. The runaway candidate
// must be stopped by its fuel, the deterministic budget, and not by the wall-time
// backstop.
func TestValidationSameUnderContention(t *testing.T) {
	sb := sandbox(t)
	v := tools.NewValidator(sb, tools.ValidatorConfig{Clock: func() time.Time { return time.Unix(0, 0) }})
	files, _ := filepath.Glob(filepath.Join(candidatesDir, "*.json"))
	if len(files) < 30 {
		t.Fatalf("only %d candidates", len(files))
	}
	validateAll := func() []string {
		out := make([]string, len(files))
		for i, f := range files {
			b, err := json.Marshal(v.Validate(context.Background(), loadCandidate(t, filepath.Base(f))))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = string(b)
		}
		return out
	}
	quiet := validateAll()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var spins, gcs, guests atomic.Int64
	for i := 0; i < 4*runtime.GOMAXPROCS(0); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := sha256.Sum256(nil)
			for ctx.Err() == nil {
				for j := 0; j < 1000; j++ {
					h = sha256.Sum256(h[:])
				}
				spins.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			runtime.GC()
			gcs.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sb.Run(ctx, `function run() { while (true) {} }`, nil, nil, wasm.Options{Limits: wasm.Limits{WallTime: 200 * time.Millisecond}})
				guests.Add(1)
			}
		}()
	}
	loaded := validateAll()
	cancel()
	wg.Wait()
	t.Logf("meanwhile: %d spin rounds, %d garbage collections, %d CPU-bound guest calls", spins.Load(), gcs.Load(), guests.Load())
	if gcs.Load() == 0 || guests.Load() == 0 {
		t.Fatal("the contention did not run")
	}

	for i, f := range files {
		name := filepath.Base(f)
		if quiet[i] != loaded[i] {
			t.Errorf("%s: the report differs under load:\nquiet:  %s\nloaded: %s", name, quiet[i], loaded[i])
		}
		if name == "bad_runaway_loop.json" && !strings.Contains(loaded[i], `fuel: the call used its budget`) {
			t.Errorf("%s: not stopped by its fuel budget: %s", name, loaded[i])
		}
		if strings.Contains(loaded[i], "wall_time") || strings.Contains(loaded[i], "wall time") {
			t.Errorf("%s: the wall-time backstop decided a verdict: %s", name, loaded[i])
		}
	}
}
