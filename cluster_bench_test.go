package libos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/store"
)

// appendEvents appends b.N synced events, spread over conc writers, each on its own
// process, and reports events per second.
func appendEvents(b *testing.B, st *store.Store, pids []string, conc int) {
	b.Helper()
	ctx := context.Background()
	data := json.RawMessage(`{"note":"an event of about a hundred bytes, as a tool call's audit event carries"}`)
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < conc; w++ {
		n := b.N / conc
		if w < b.N%conc {
			n++
		}
		wg.Add(1)
		go func(pid string, n int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if _, err := st.Append(ctx, pid, "note", data); err != nil {
					errs <- err
					return
				}
			}
		}(pids[w], n)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// Synced events per second on one host (Pebble, every append synced) at concurrency 1
// and 16.
func BenchmarkAppendOneHost(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var pids []string
			for i := 0; i < conc; i++ {
				pids = append(pids, fmt.Sprintf("pid_%d", i))
			}
			appendEvents(b, st, pids, conc)
		})
	}
}

// Synced events per second on the three-host cluster on loopback (each append
// acknowledged by the R3 stream, then synced to the writer's Pebble) at concurrency 1
// and 16, each writer on its own process.
func BenchmarkAppendCluster(b *testing.B) {
	hs := startHosts(b, 3)
	a := hs[0]
	img, err := libos.DefaultImage()
	if err != nil {
		b.Fatal(err)
	}
	var pids []string
	for i := 0; i < 16; i++ {
		pid, err := a.sys.SpawnImage(context.Background(), img)
		if err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			appendEvents(b, a.sys.Store(), pids, conc)
		})
	}
}
