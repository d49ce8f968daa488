package wasm

import (
	"math"
	"testing"
)

// "Date.now() must never saturate to nonsense": the host holds its clock to the range a
// Date can hold (±8.64e15 ms), and the guest holds whatever now_ms answers to it as well,
// so a clock outside it (or NaN) gives the edge of the range (or the epoch), never a value
// no Date can hold, a wrapped integer or a trap.
func TestGuestClockRange(t *testing.T) {
	const program = `function run() { const d = new Date(); return [Date.now(), d.getTime(), d.toISOString()]; }`
	h := newBareHost(t)
	for _, tc := range []struct {
		name string
		ms   float64
		want string
	}{
		{"a clock in range is read as it is", 1767323045678, `[1767323045678,1767323045678,"2026-01-02T03:04:05.678Z"]`},
		{"the top of the Date range", 8.64e15, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"past the top is held at the top", 9.3e18, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"far past the top", 1e300, `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"+Inf", math.Inf(1), `[8640000000000000,8640000000000000,"+275760-09-13T00:00:00.000Z"]`},
		{"below the bottom is held at the bottom", -1e300, `[-8640000000000000,-8640000000000000,"-271821-04-20T00:00:00.000Z"]`},
		{"-Inf", math.Inf(-1), `[-8640000000000000,-8640000000000000,"-271821-04-20T00:00:00.000Z"]`},
		{"NaN reads as the epoch", math.NaN(), `[0,0,"1970-01-01T00:00:00.000Z"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.nowMs = tc.ms
			status, out := h.run(t, program)
			if status != 0 || out != tc.want {
				t.Errorf("now_ms %v: status %d, %s; want %s", tc.ms, status, out, tc.want)
			}
		})
	}
}
