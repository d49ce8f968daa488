//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package linmem

import (
	"math"
	"syscall"
)

const supported = true

// mappedMemory is a whole reservation of max bytes, read-write, of which the guest sees
// the first len bytes. Pages the guest never touches cost nothing.
type mappedMemory struct {
	mem []byte
}

func reserve(maxBytes uint64) *mappedMemory {
	if maxBytes == 0 || maxBytes > math.MaxInt {
		return nil
	}
	mem, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_READ|syscall.PROT_WRITE, mapFlags)
	if err != nil {
		return nil
	}
	return &mappedMemory{mem: mem}
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if m.mem == nil || size > uint64(len(m.mem)) {
		return nil
	}
	return m.mem[:size:size]
}

func (m *mappedMemory) Free() {
	if m.mem != nil {
		syscall.Munmap(m.mem)
		m.mem = nil
	}
}
