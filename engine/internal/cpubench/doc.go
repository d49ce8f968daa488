// Package cpubench reports the CPU time a benchmark used, so throughput figures stay
// meaningful on a loaded machine where wall time includes waiting for a core.
//
// It is used by benchmarks only and must not be imported by code that runs in production.
package cpubench
