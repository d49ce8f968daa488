package linmem

import "syscall"

// MAP_NORESERVE: the reservation is address space, not a promise of memory; the wasm page
// limit is what bounds what the guest may use.
const mapFlags = syscall.MAP_PRIVATE | syscall.MAP_ANON | syscall.MAP_NORESERVE

// dropZeroes: on Linux, MADV_DONTNEED on a private anonymous mapping guarantees that the
// next access sees a zeroed page.
const dropZeroes = true

func drop(b []byte) error { return syscall.Madvise(b, syscall.MADV_DONTNEED) }
