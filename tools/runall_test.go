package tools

import (
	"strings"
	"sync/atomic"
	"testing"
)

// runAll returns outcomes in index order whatever the parallelism, and runs each index
// exactly once.
func TestRunAllOrder(t *testing.T) {
	for _, parallel := range []int{0, 1, 2, 4, 64} {
		var calls atomic.Int64
		out := runAll(37, parallel, func(i int) testOutcome {
			calls.Add(1)
			return testOutcome{tr: TestResult{Index: i}}
		})
		if len(out) != 37 || calls.Load() != 37 {
			t.Fatalf("parallel %d: %d outcomes, %d calls", parallel, len(out), calls.Load())
		}
		for i, o := range out {
			if o.tr.Index != i {
				t.Fatalf("parallel %d: outcome %d is test %d", parallel, i, o.tr.Index)
			}
		}
	}
}

// Rule (engine: "the host survives every tool"): a panic while a test runs on another
// goroutine reaches the caller of Validate, where the kernel's recovery turns it into a
// failed call, instead of ending the process.
func TestRunAllPanicReachesCaller(t *testing.T) {
	for _, parallel := range []int{1, 4} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), "test 3") {
					t.Fatalf("parallel %d: recovered %v", parallel, p)
				}
			}()
			runAll(8, parallel, func(i int) testOutcome {
				if i == 3 {
					panic("test 3")
				}
				return testOutcome{}
			})
			t.Fatalf("parallel %d: no panic", parallel)
		}()
	}
}
