//go:build race

package store

// raceEnabled shrinks the heavy tests: the race detector slows Pebble tenfold.
const raceEnabled = true
