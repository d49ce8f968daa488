//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package linmem

const supported = false

func reserve(uint64) *heapMemory { return nil }
