// Package linmem backs the guest's linear memory with address space reserved up front, so
// that growing it never copies and never zeroes in Go.
//
// wazero grows a linear memory it allocated itself with append: past its capacity, every
// memory.grow copies the whole memory into a larger slice. A guest that grows towards a
// cap of gigabytes then spends seconds in those copies, where nothing can poll the host.
// Reserving the whole cap as one anonymous mapping, which the kernel backs with zeroed
// pages only when they are touched, makes a grow a change of length, and closing the
// instance hands its pages straight back to the kernel.
//
// A Memory (New) is the allocator of one instance and then zeroes parts of its memory
// for the host's restore, asking the kernel which pages were touched (Linux's page map)
// so that a mostly untouched range costs only its touched pages.
package linmem

import (
	"github.com/tetratelabs/wazero/experimental"
)

// Allocator is the MemoryAllocator to instantiate guests with: a reserved mapping where
// the platform offers one (reserve), else nil, which leaves wazero's own allocation.
func Allocator() experimental.MemoryAllocator {
	if !supported {
		return nil
	}
	return experimental.MemoryAllocatorFunc(allocate)
}

func allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	if m := reserve(maxBytes); m != nil {
		return m
	}
	// No address space to reserve (a 32-bit host, a strict overcommit policy): memory
	// from the Go heap, reallocated as it grows.
	return &heapMemory{buf: make([]byte, 0, capBytes), max: maxBytes}
}

type heapMemory struct {
	buf []byte
	max uint64
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Grow the capacity by at least half, as append would, but never past max.
	c := max(size, min(m.max, uint64(cap(m.buf))*3/2))
	b := make([]byte, size, c)
	copy(b, m.buf)
	m.buf = b
	return b
}

func (m *heapMemory) Free() { m.buf = nil }
