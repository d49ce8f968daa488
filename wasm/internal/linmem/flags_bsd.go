//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package linmem

import "syscall"

const mapFlags = syscall.MAP_PRIVATE | syscall.MAP_ANON
