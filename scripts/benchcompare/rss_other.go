//go:build !unix

package main

import "os"

// peakRSS is not reported where rusage has no peak resident set (Windows): 0.
func peakRSS(*os.ProcessState) float64 { return 0 }
