//go:build race

package engine_test

// raceEnabled shrinks the crash tests: the race detector slows Pebble tenfold.
const raceEnabled = true
