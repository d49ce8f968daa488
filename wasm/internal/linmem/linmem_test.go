package linmem

import (
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// A memory grows in place up to its max, starts zeroed, keeps its contents, and refuses
// to grow past max; the heap fallback behaves the same except that it may move.
func TestLinearMemory(t *testing.T) {
	const page = 64 << 10
	for _, tc := range []struct {
		name    string
		inPlace bool
		alloc   func(capBytes, maxBytes uint64) experimental.LinearMemory
	}{
		{"reserved", supported, func(c, m uint64) experimental.LinearMemory {
			return Allocator().Allocate(c, m)
		}},
		{"heap", false, func(c, m uint64) experimental.LinearMemory {
			return &heapMemory{buf: make([]byte, 0, c), max: m}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "reserved" && !supported {
				t.Skip("no reservation on this platform")
			}
			m := tc.alloc(2*page, 512*page)
			defer m.Free()
			b := m.Reallocate(2 * page)
			if len(b) != 2*page {
				t.Fatalf("len %d", len(b))
			}
			b[0], b[len(b)-1] = 1, 2
			base := unsafe.SliceData(b)
			b = m.Reallocate(300 * page)
			if len(b) != 300*page || b[0] != 1 || b[2*page-1] != 2 {
				t.Fatal("contents lost when growing")
			}
			for _, i := range []int{2 * page, 100 * page, 300*page - 1} {
				if b[i] != 0 {
					t.Fatalf("grown memory not zero at %d", i)
				}
			}
			if tc.inPlace && unsafe.SliceData(b) != base {
				t.Error("a reserved memory moved when it grew")
			}
			if m.Reallocate(512*page) == nil {
				t.Error("growing to max refused")
			}
			if m.Reallocate(513*page) != nil {
				t.Error("grew past max")
			}
		})
	}
}
