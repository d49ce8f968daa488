package store

import (
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
type walFS struct{ vfs.FS }

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

func (fs walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != walCategory {
		return f, err
	}
	return &walFile{File: f}, nil
}

// ReuseForWrite is how Pebble recycles an old WAL: the new log overwrites it from the
// start, and the zeros go after the old file's end when the new log passes it.
func (fs walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || category != walCategory {
		return f, err
	}
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return &walFile{File: f, size: size}, nil
}

// Unwrap is the file system walFS wraps.
func (fs walFS) Unwrap() vfs.FS { return fs.FS }

// walFile is a WAL file that Pebble writes sequentially with Write.
type walFile struct {
	vfs.File
	off  int64 // where the next Write lands
	size int64 // the file's size as written through this walFile: data and zeros
	// failed stops the zero writes after one failed: they are an optimisation.
	failed bool
}

// walZeros is the source of the zeros; it is never written to.
var walZeros = make([]byte, 64<<10)

func (f *walFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.off += int64(n)
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
	if f.failed {
		return
	}
	end := f.size + min(max(f.size, walAheadMin), walAheadMax)
	for f.size < end {
		n, err := f.File.WriteAt(walZeros[:min(int64(len(walZeros)), end-f.size)], f.size)
		f.size += int64(n)
		if err != nil {
			f.failed = true
			return
		}
	}
}
