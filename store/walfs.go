package store

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS is the file system the store gives Pebble: fs itself, except that the WAL
// files it creates are written ahead of their data with zeros.
//
// Why: every acknowledged write waits for a WAL sync, and on ext4 (and most file
// systems) fdatasync of a file that grew since its last sync must also commit the new
// size and extents to the file system's journal, while a sync that only overwrote
// blocks inside the file flushes just those blocks. On the reference machine a 1 KB
// write with fdatasync took 0.31–0.34 ms p50 overwriting and 0.64–1.0 ms p50 growing
// the file. Pebble recycles old WAL files for exactly this reason, but a WAL is only
// recycled after two memtable flushes, and a log file left from before Open is never
// recycled, so a fresh or reopened store synced growing files for its first several
// megabytes of writes. Pebble's own preallocation (fallocate with KEEP_SIZE) reserves
// blocks without changing the size, so it does not help the sync.
//
// What is written is exactly Pebble's WAL with zeros after it, which Pebble reads as
// a zeroed tail: the end of the log (it tolerates one in the most recent WAL, and
// closes every older WAL with an EOF trailer before it creates the next one). A failed
// zero write is ignored: the file then grows with its data, as it would without walFS.
type walFS struct {
	vfs.FS
	// logs counts the WAL files created through this walFS (one per Store).
	logs atomic.Int64
	// rotated bounds how far a WAL after the first is written with zeros at its
	// creation: Pebble's memtable size (set before Pebble opens).
	rotated int64
	// last is the most recent WAL created, whose log the next one is sized by.
	last atomic.Pointer[walFile]
}

// walCategory is the write category Pebble creates its WAL files with.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// The zeros written ahead of a WAL's data: as much as the file already holds, between
// walAheadMin and walAheadMax. A short-lived process (one that writes an EOF trailer
// on Close and little else) writes little; a busy one pays a growing sync once per
// megabyte of log.
const (
	walAheadMin = 64 << 10
	walAheadMax = 1 << 20
)

// A WAL created after the first one of a Store is written with zeros at once, twice
// as far as the previous WAL's log reached and a half more for slack (a new store's
// memtables double in size, so each log about doubles), at most Pebble's memtable size
// (walFS.rotated), which a log seldom outgrows. A second WAL means the Store is busy
// (a memtable filled), so the zeros are worth writing in one go: written as the log
// grows, they came in bursts of up to walAheadMax each before a sync, and that sync,
// which a call waits for, then also wrote them (in a fresh store about one call in a
// hundred waited 1–5 ms more for it). Written at the WAL's creation they cost the one
// commit that fills the memtable, which already waits for Pebble to create the new
// WAL, and every commit queued behind it: hence no more zeros than the log will need
// (a flat memtable's worth measured a third worse p99 at 16 concurrent writers). The
// first WAL keeps the growing scheme, so a short-lived process writes little; an old
// WAL that Pebble recycles (ReuseForWrite) is already about a log long.

func (fs *walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != walCategory {
		return f, err
	}
	wf := &walFile{File: f}
	fs.created(wf)
	return wf, nil
}

// created writes the zeros ahead of a new WAL's data that are written at once (see
// walFS.rotated).
func (fs *walFS) created(f *walFile) {
	prev := fs.last.Swap(f)
	if fs.logs.Add(1) > 1 && prev != nil {
		n := prev.logged.Load()
		f.zeroTo(min(max(2*n+n/2, walAheadMin), fs.rotated))
	}
}

// ReuseForWrite is how Pebble recycles an old WAL: the new log overwrites it from the
// start, and the zeros go after the old file's end when the new log passes it.
func (fs *walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || category != walCategory {
		return f, err
	}
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	wf := &walFile{File: f, size: size}
	fs.created(wf)
	return wf, nil
}

// Unwrap is the file system walFS wraps.
func (fs *walFS) Unwrap() vfs.FS { return fs.FS }

// walFile is a WAL file that Pebble writes sequentially with Write.
type walFile struct {
	vfs.File
	off int64 // where the next Write lands
	// logged is off, for the walFS to read when it sizes the next WAL.
	logged atomic.Int64
	size   int64 // the file's size as written through this walFile: data and zeros
	// failed stops the zero writes after one failed: they are an optimisation.
	failed bool
}

// walZeros is the source of the zeros; it is never written to.
var walZeros = make([]byte, 64<<10)

func (f *walFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.off += int64(n)
	f.logged.Store(f.off)
	if f.off > f.size {
		f.size = f.off
		if err == nil {
			f.zeroAhead()
		}
	}
	return n, err
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if end := off + int64(n); end > f.size {
		f.size = end
	}
	return n, err
}

// zeroAhead writes zeros after the file's end, so that the Writes that follow, and
// the syncs that follow them, stay inside the file.
func (f *walFile) zeroAhead() {
	f.zeroTo(f.size + min(max(f.size, walAheadMin), walAheadMax))
}

// zeroTo writes zeros from the file's end up to end.
func (f *walFile) zeroTo(end int64) {
	if f.failed {
		return
	}
	for f.size < end {
		n, err := f.File.WriteAt(walZeros[:min(int64(len(walZeros)), end-f.size)], f.size)
		f.size += int64(n)
		if err != nil {
			f.failed = true
			return
		}
	}
}
