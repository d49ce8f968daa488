package linmem

import (
	"runtime"
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

// Zero and ZeroTouched leave every byte of the range zero, whatever was written where,
// and nothing outside it: the restore of an instance relies on it (wasm/engine.go).
func TestZero(t *testing.T) {
	const page = 64 << 10
	for _, heap := range []bool{false, true} {
		m := New()
		var lm experimental.LinearMemory
		if heap {
			m.heap = &heapMemory{buf: make([]byte, 0, 64*page), max: 64 * page}
			lm = m.heap
		} else {
			lm = m.Allocate(64*page, 64*page)
		}
		b := lm.Reallocate(64 * page)
		for _, tc := range []struct {
			name   string
			lo, hi int
			writes []int
		}{
			{"short", 100, 5000, []int{100, 4999}},
			{"few pages", 3, 40 * page, []int{3, 4097, 17 * page, 40*page - 1}},
			// more touched than ZeroTouched clears page by page
			{"many pages", page + 1, 60 * page, func() []int {
				var w []int
				for i := page + 1; i < 60*page; i += 4096 {
					w = append(w, i)
				}
				return w
			}()},
		} {
			for _, touched := range []bool{false, true} {
				b[tc.lo-1], b[tc.hi] = 7, 7
				for _, i := range tc.writes {
					b[i] = 1
				}
				if touched {
					m.ZeroTouched(b[tc.lo:tc.hi])
				} else {
					m.Zero(b[tc.lo:tc.hi])
				}
				for i := tc.lo; i < tc.hi; i++ {
					if b[i] != 0 {
						t.Fatalf("heap=%v %s touched=%v: byte %d not zero", heap, tc.name, touched, i)
					}
				}
				if b[tc.lo-1] != 7 || b[tc.hi] != 7 {
					t.Fatalf("heap=%v %s touched=%v: a byte outside the range changed", heap, tc.name, touched)
				}
			}
		}
		lm.Free()
	}
}

// On Linux the page map is read, and passes its own check, so that ZeroTouched does
// what its tests above check through the page map rather than through the fallback.
func TestPageMapUsed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the page map is Linux's")
	}
	var e [8]byte
	if !readPageMap(uintptr(unsafe.Pointer(&e[0])), e[:]) {
		t.Skip("no usable /proc/self/pagemap here: ZeroTouched clears whole ranges")
	}
	if !pageBacked(e[:]) {
		t.Error("the page of a live stack variable reads as untouched")
	}
}
