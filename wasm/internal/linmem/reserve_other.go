//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package linmem

import "errors"

const supported = false

// mappedMemory never exists here: reserve always declines.
type mappedMemory struct{ mem []byte }

func (m *mappedMemory) Reallocate(uint64) []byte { return nil }
func (m *mappedMemory) Free()                    {}

func reserve(uint64) *mappedMemory { return nil }

const dropZeroes = false

func drop([]byte) error { return errNoDrop }

var errNoDrop = errors.New("linmem: no page drop on this platform")
