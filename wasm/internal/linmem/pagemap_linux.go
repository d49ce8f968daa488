package linmem

import (
	"encoding/binary"
	"os"
	"sync"
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
		pageMap.f, _ = os.Open("/proc/self/pagemap")
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
