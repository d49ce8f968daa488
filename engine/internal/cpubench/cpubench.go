//go:build unix

package cpubench

import (
	"syscall"
	"testing"
	"time"
)

// Start returns a func that, called after the benchmark loop, reports the process CPU
// time (user + system, all threads, GC included) per operation and the throughput per
// CPU-second as unit.
func Start(b *testing.B, unit string) func() {
	start := cpu()
	return func() {
		used := cpu() - start
		if used <= 0 || b.N == 0 {
			return
		}
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/used.Seconds(), unit+"/cpu-s")
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
