package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// Synced event appends on the real disk. Targets on the reference machine:
// >= 4,000/s at concurrency 1 and >= 20,000/s at concurrency 16 (group commit).
// Report the appends/s metric.
func BenchmarkAppendSynced(b *testing.B) {
	for _, conc := range []int{1, 16} {
		for _, pids := range []string{"one-pid", "pid-per-writer"} {
			b.Run(fmt.Sprintf("conc=%d/%s", conc, pids), func(b *testing.B) {
				s, err := Open(b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				data := json.RawMessage(`{"call_id":"c","tool":"echo","args":{"x":1}}`)
				warmUp(b, s)
				var worker atomic.Int64
				b.ResetTimer()
				runConcurrent(b, conc, func() func() error {
					w := worker.Add(1)
					pid := "bench"
					if pids == "pid-per-writer" {
						pid = fmt.Sprintf("bench-%d", w)
					}
					return func() error {
						_, err := s.Append(ctx, pid, "note", data)
						return err
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
				if pids == "one-pid" {
					if err := s.Verify("bench"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// runConcurrent runs b.N operations spread over exactly conc goroutines.
func runConcurrent(b *testing.B, conc int, newOp func() func() error) {
	var next atomic.Int64
	errs := make(chan error, conc)
	for range conc {
		op := newOp()
		go func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range conc {
		if err := <-errs; err != nil {
			b.Error(err)
		}
	}
}

// warmUp brings the store to its steady state: Pebble writes its WAL into recycled
// log files, which a sync overwrites in place instead of growing, as a store that
// has been running for a while does. A fresh directory pays an extra metadata
// journal write per sync until its first two memtable flushes.
func warmUp(b *testing.B, s *Store) {
	b.Helper()
	pad := json.RawMessage(`{"pad":"` + strings.Repeat("x", 4000) + `"}`)
	for round := 0; round < 2; round++ {
		err := s.Update(ctx, func(tx *Tx) error {
			for i := 0; i < 1200; i++ {
				if _, err := tx.Append("warm-up", "pad", pad); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
