package initgc

import (
	"os"
	"runtime/debug"
)

// envPercent is the target the runtime set from GOGC (100 when it is unset or not a
// number, -1 for "off") before this package switched the collector off. It is a
// variable initialiser rather than an init function so that it runs at this
// package's own turn in the initialisation order. (os is initialised before it:
// runtime/debug imports it.)
var envPercent = debug.SetGCPercent(-1)

// Target is the collector's target for a command that wants want: the one GOGC
// names when the environment sets it, since an explicit GOGC always wins, else want.
func Target(want int) int {
	if os.Getenv("GOGC") != "" {
		return envPercent
	}
	return want
}
