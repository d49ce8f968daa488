//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package linmem

import "syscall"

const mapFlags = syscall.MAP_PRIVATE | syscall.MAP_ANON

// dropZeroes: the BSDs' and Darwin's MADV_DONTNEED is a hint that may keep the contents,
// so Zero clears instead.
const dropZeroes = false

func drop([]byte) error { return syscall.ENOTSUP }
