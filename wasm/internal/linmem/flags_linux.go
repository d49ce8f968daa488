package linmem

import "syscall"

// MAP_NORESERVE: the reservation is address space, not a promise of memory; the wasm page
// limit is what bounds what the guest may use.
const mapFlags = syscall.MAP_PRIVATE | syscall.MAP_ANON | syscall.MAP_NORESERVE
