package store

import (
	"github.com/cockroachdb/pebble/v2"
)

// The call-ID ceiling: proving a new call ID absent without searching the tables.
//
// tool_called must find no open marker of its call, a ToolResult must find no result
// of its call, and a syscall's journal entry no entry at its index: point reads, under the write lock, of keys that are
// almost never there. A Pebble Get of an absent key seeks every memtable and every
// level (L6 without its bloom filter, which Get does not read there), and with random
// call IDs lands on a random data block, usually not cached. The ceiling replaces both
// reads by a comparison when it can: for each process and each of the two tables, the
// store keeps a call ID at least as large, bytewise, as every call ID of that table's
// keys. A call ID above it cannot be there. The ceiling is read once per process after
// Open (one reverse seek in the table, which sees this Tx's own writes), raised by
// every write of a key of the table before the batch is applied (a batch that is then
// discarded leaves it higher than needed, which only costs a read later), and dropped
// when a replicated batch of another host writes the process. Anything not above it is
// read as before, so the check stays exact whatever call IDs a caller makes, across
// restarts too. The engine's call IDs grow with time (randid.Ordered), so a call opened
// after every other takes the comparison.

// callCeiling holds the ceilings of one process: of its open markers, its results and
// its journal entries.
type callCeiling struct {
	open, res, jrnl ceiling
}

// ceiling is one table's ceiling; it is read from the table on first use.
type ceiling struct {
	id   string
	read bool
}

// of returns the ceiling of tbl (tOpen, tResult or tJournal) in c.
func (c *callCeiling) of(tbl string) *ceiling {
	switch tbl {
	case tOpen:
		return &c.open
	case tJournal:
		return &c.jrnl
	}
	return &c.res
}

// callAbove reports whether call sorts above every call ID of pid's keys in tbl (tOpen
// or tResult), so that the key of call is proven absent. In tJournal, call is the
// whole key after the process's prefix (the call ID, 0x00 and the entry's index): what
// is compared is always the key's bytes after prefix(tbl, pid), so the proof holds
// whatever the IDs look like. It reads the ceiling once per
// process; when that read fails it answers false, and the caller looks the key up.
func (tx *Tx) callAbove(tbl, pid, call string) bool {
	c := tx.s.ceilingOf(pid).of(tbl)
	if !c.read {
		last, ok := tx.lastCallID(tbl, pid)
		if !ok {
			return false
		}
		c.id, c.read = last, true
	}
	return call > c.id
}

// raiseCall notes that a key of call in pid's tbl is being written.
func (tx *Tx) raiseCall(tbl, pid, call string) {
	c := tx.s.ceilingOf(pid).of(tbl)
	if c.read && call > c.id {
		c.id = call
	}
}

// lastCallID is the largest call ID of pid's keys in tbl as this Tx sees them ("" when
// there is none).
func (tx *Tx) lastCallID(tbl, pid string) (string, bool) {
	pfx := prefix(tbl, pid)
	it, err := tx.b.NewIter(&pebble.IterOptions{LowerBound: pfx, UpperBound: upperBound(pfx)})
	if err != nil {
		return "", false
	}
	last := ""
	if it.Last() {
		last = string(it.Key()[len(pfx):])
	}
	if err := it.Close(); err != nil {
		return "", false
	}
	return last, true
}

// ceilingOf is pid's entry in the ceiling cache (under wmu), made when missing. The
// cache is bounded as the head cache is: past maxCachedHeads processes it starts over.
func (s *Store) ceilingOf(pid string) *callCeiling {
	c := s.ceilings[pid]
	if c == nil {
		if s.ceilings == nil || len(s.ceilings) >= maxCachedHeads {
			s.ceilings = make(map[string]*callCeiling)
		}
		c = &callCeiling{}
		s.ceilings[pid] = c
	}
	return c
}
