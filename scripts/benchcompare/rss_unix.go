//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSS is a finished child's peak resident set in MiB, from its rusage: kilobytes on
// Linux, bytes on darwin.
func peakRSS(ps *os.ProcessState) float64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / 1024
}
