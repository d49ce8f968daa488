package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns prefix followed by 32 lowercase hex digits (16 random bytes). Without
// randomness nothing the module names could be trusted to be unique, so a failing
// source panics rather than hand out a predictable ID.
func New(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("randid: no randomness: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}
