package linmem

import (
	"encoding/binary"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The page map (/proc/self/pagemap, proc(5)) gives one 64-bit entry per virtual page of
// this process: bit 63 set when the page is present in memory, bit 62 when it is swapped
// out. Either means the page holds what was last written to it; a page with neither was
// never touched since it was mapped or dropped, and reads as zero.
var pageMap struct {
	once sync.Once
	f    *os.File
}

// readPageMap reads the entries of the pages from addr on, one per 8 bytes of out;
// false when the page map cannot be read.
func readPageMap(addr uintptr, out []byte) bool {
	pageMap.once.Do(func() {
		f, err := os.Open("/proc/self/pagemap")
		if err == nil && !pageMapWorks(f) {
			f.Close()
			f = nil
		}
		pageMap.f = f
	})
	if pageMap.f == nil {
		return false
	}
	n, err := pageMap.f.ReadAt(out, int64(addr/uintptr(pageSize))*8)
	return err == nil && n == len(out)
}

func pageBacked(entry []byte) bool {
	return binary.LittleEndian.Uint64(entry)&(1<<63|1<<62) != 0
}

// pageMapWorks checks once that the page map tells touched pages from untouched ones
// here (a kernel without it, or a sandbox that reports every page absent, would make
// ZeroTouched skip pages that hold data): a page of a fresh mapping must read as
// neither present nor swapped, and as present once written.
func pageMapWorks(f *os.File) bool {
	mem, err := syscall.Mmap(-1, 0, 2*pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return false
	}
	defer syscall.Munmap(mem)
	mem[pageSize] = 1
	var e [16]byte
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	n, err := f.ReadAt(e[:], int64(addr/uintptr(pageSize))*8)
	return err == nil && n == len(e) && !pageBacked(e[:8]) && pageBacked(e[8:])
}
