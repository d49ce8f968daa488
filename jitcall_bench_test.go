package libos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentlibos/libos"
)

// addSource is the registered JIT tool of make bench-compare's call rows.
const addSource = `export function run(args: { a: number, b: number }) { return { sum: args.a + args.b }; }`

// registeredAdd opens a System on a fresh store (the compilation cache in the user's
// cache directory, warm after the first run), spawns a process of the default image
// and registers the JIT tool add in it, as scripts/benchcompare does.
func registeredAdd(b *testing.B) (*libos.System, string) {
	b.Helper()
	ctx := context.Background()
	cache, err := libos.DefaultCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	sys, err := libos.Open(ctx, filepath.Join(b.TempDir(), "store"), libos.Options{CacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sys.Close() })
	img, err := libos.DefaultImage()
	if err != nil {
		b.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		b.Fatal(err)
	}
	src, _ := json.Marshal(addSource)
	prop := `{"name":"add","description":"Add two integers.","source_code":` + string(src) + `,
		"input_schema":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false},
		"output_schema":{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"],"additionalProperties":false},
		"tests":[{"args":{"a":2,"b":3},"expected":{"sum":5},"syscalls":[]}]}`
	res, err := sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(prop))
	if err != nil {
		b.Fatal(err)
	}
	var p struct {
		ID string `json:"candidate_id"`
	}
	if err := json.Unmarshal(res.Structured, &p); err != nil {
		b.Fatal(err)
	}
	id, _ := json.Marshal(map[string]string{"candidate_id": p.ID})
	if _, err := sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(id)); err != nil {
		b.Fatal(err)
	}
	return sys, pid
}

// processCPU is the CPU time this process has used: every goroutine, the GC, Pebble's
// WAL writer and the kernel's share of each fdatasync.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRegisteredJITCall is make bench-compare's "isolated JIT call" row in this
// process: the registered tool add called end to end with System.HandleFrame (adapter,
// input schema, tool_called, a fresh JavaScript context in the sandbox, output schema,
// the ToolResult synced to Pebble), at concurrency 1 and 16. A call returns only after
// the WAL sync that covers its settlement. Targets: ≤ 0.5 ms p50 and ≤ 2 ms p99 at
// concurrency 1, ≥ 3,000 calls/s at concurrency 16. It reports the latency quantiles,
// calls/s and the process CPU per call.
func BenchmarkRegisteredJITCall(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			sys, pid := registeredAdd(b)
			ctx := context.Background()
			frame := []byte(`{"name":"add","arguments":{"a":40,"b":2}}`)
			call := func() error {
				res, err := sys.HandleFrame(ctx, pid, frame)
				if err == nil && !strings.Contains(res.Text, `"sum":42`) {
					err = fmt.Errorf("result %s", res.Text)
				}
				return err
			}
			for range 20 {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			durs := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, conc)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						start := time.Now()
						if err := call(); err != nil {
							errs <- err
							return
						}
						durs[i] = time.Since(start)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
