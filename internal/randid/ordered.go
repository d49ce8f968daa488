package randid

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// orderedLast is the last stamp Ordered handed out in this process.
var orderedLast struct {
	sync.Mutex
	stamp uint64
}

// Ordered returns prefix followed by 32 lowercase hex digits, like New, whose first 16
// digits are a stamp that grows with every call in this process (the wall clock in
// nanoseconds, or the last stamp plus one when the clock has not moved on) and whose
// last 16 are 8 random bytes. So IDs made one after another sort one after another,
// bytewise, and IDs made later by another process on a clock that moved forward sort
// after them too.
//
// Why: a store that keys records by such an ID can prove a new one absent by
// comparing it with the largest it holds, instead of searching its tables for it
// (store: the call-ID ceiling). Nothing relies on the order for uniqueness: the
// stamp and 64 random bits make a repeat as unlikely as New's, and the store still
// checks every ID that is not above its ceiling.
func Ordered(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[8:]); err != nil {
		panic("randid: no randomness: " + err.Error())
	}
	now := uint64(time.Now().UnixNano())
	orderedLast.Lock()
	if now <= orderedLast.stamp {
		now = orderedLast.stamp + 1
	}
	orderedLast.stamp = now
	orderedLast.Unlock()
	binary.BigEndian.PutUint64(b[:8], now)
	return prefix + hex.EncodeToString(b[:])
}
