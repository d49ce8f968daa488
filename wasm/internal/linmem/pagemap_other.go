//go:build !linux

package linmem

// Only Linux has the page map; elsewhere ZeroTouched is Zero.
func readPageMap(uintptr, []byte) bool { return false }

func pageBacked([]byte) bool { return true }
