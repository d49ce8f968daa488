package linmem

import (
	"os"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// Memory allocates the linear memory of one instance and, afterwards, zeroes parts of it
// for the host's restore. A reserved memory hands whole pages back to the kernel instead
// of writing them (see Zero); a memory on the Go heap is cleared.
type Memory struct {
	mapped *mappedMemory
	heap   *heapMemory
	// entries is ZeroTouched's buffer for the page table entries it reads.
	entries []byte
}

// New returns the allocator of one instance's memory: pass it to
// experimental.WithMemoryAllocator for exactly one instantiation.
func New() *Memory { return &Memory{} }

// Allocate implements experimental.MemoryAllocator.
func (m *Memory) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	if r := reserve(maxBytes); r != nil {
		m.mapped = r
		return r
	}
	m.heap = &heapMemory{buf: make([]byte, 0, capBytes), max: maxBytes}
	return m.heap
}

// pageSize is the kernel's page: the unit Zero hands back.
var pageSize = os.Getpagesize()

// dropMin is the smallest run of whole pages Zero hands back rather than clears: below it,
// a write costs less than the system call and the faults that bring the pages back.
const dropMin = 64 << 10

// Zero makes b, a part of the memory this allocator handed out, all zero. On a reserved
// memory where the kernel guarantees it (dropZeroes), the whole pages of a long range are
// dropped (madvise MADV_DONTNEED): the kernel maps a zeroed page at the next touch, so
// zeroing a range the guest hardly touched costs the pages it touched, not the range,
// and pages nobody touches again stay out of the resident set. Everything else, and a
// range whose drop fails, is cleared. It never fails: the memory is zero afterwards.
func (m *Memory) Zero(b []byte) {
	if len(b) < dropMin || m.mapped == nil || !dropZeroes || !m.owns(b) {
		clear(b)
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	head := int((uintptr(pageSize) - start%uintptr(pageSize)) % uintptr(pageSize))
	whole := (len(b) - head) / pageSize * pageSize
	clear(b[:head])
	if err := drop(b[head : head+whole]); err != nil {
		clear(b[head : head+whole])
	}
	clear(b[head+whole:])
}

// owns reports whether b lies within the reservation.
func (m *Memory) owns(b []byte) bool {
	if len(m.mapped.mem) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(m.mapped.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(m.mapped.mem))
}

// ZeroTouched makes b, a part of the memory this allocator handed out, all zero, as Zero
// does, for a range that is expected to be mostly untouched (the deep end of the shadow
// stack, the memory past the guest allocator's break): where the kernel can say which
// pages of b are backed by memory (touched since they were last dropped, resident or
// swapped out), only those are cleared, and a page that is not backed reads as zero by
// the kernel's guarantee. Pages cleared stay resident, and so are checked and cleared
// again next time; when more than dropMin bytes of them are backed they are dropped
// instead, which costs one flush of the TLB but leaves nothing to clear next time.
// Without that knowledge (no page map, not a reserved memory) it is Zero.
func (m *Memory) ZeroTouched(b []byte) {
	if len(b) < dropMin || m.mapped == nil || !m.owns(b) {
		m.Zero(b)
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	head := int((uintptr(pageSize) - start%uintptr(pageSize)) % uintptr(pageSize))
	pages := (len(b) - head) / pageSize
	whole := b[head : head+pages*pageSize]
	if cap(m.entries) < pages*8 {
		m.entries = make([]byte, pages*8)
	}
	entries := m.entries[:pages*8]
	if !readPageMap(uintptr(unsafe.Pointer(unsafe.SliceData(whole))), entries) {
		m.Zero(b)
		return
	}
	clear(b[:head])
	clear(b[head+len(whole):])
	backed := 0
	for i := 0; i < pages; i++ {
		if pageBacked(entries[i*8 : i*8+8]) {
			backed++
		}
	}
	if backed == 0 {
		return
	}
	if backed*pageSize > dropMin && dropZeroes && drop(whole) == nil {
		return
	}
	for i := 0; i < pages; i++ {
		if pageBacked(entries[i*8 : i*8+8]) {
			clear(whole[i*pageSize : (i+1)*pageSize])
		}
	}
}
