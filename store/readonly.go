package store

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A read-only Store (Options.ReadOnly) reads a store directory without changing a byte
// of it, so that a command that only reads works on a read-only file system or a
// backup, and leaves the files, their sizes and their times as they were.
//
// Pebble's own read-only mode does most of it (pebble.Options.ReadOnly): it replays
// the WAL files the MANIFEST does not cover into a memtable that is never flushed,
// writes no MANIFEST, WAL or OPTIONS file, removes no obsolete or temporary file,
// runs no compaction, does not ratchet its format version, and refuses writes with
// pebble.ErrReadOnly. What it still does, the store changes:
//
//   - it takes the directory's lock as a writer does, by creating (truncating) the LOCK
//     file and locking it exclusively. The store locks it shared instead (sharedLock):
//     opened for reading, with a read lock that conflicts with a writer's exclusive
//     one both ways, so a read-only Store still fails with in_use while a writer holds
//     the directory (and a writer while it reads), and read-only Stores do not exclude
//     each other. A directory without a LOCK file has never had a writer in it, or is a
//     copy made without it: it is read without a lock;
//   - a directory without a store in it (no MANIFEST) is an error in Pebble's mode; here
//     a missing or empty directory is an empty store, as the writable Open would make
//     it, but kept in memory and never written: the directory is not created.
//
// Pebble is handed the file system through readOnlyFS, which refuses every call that
// would change it: a write Pebble attempted in spite of its mode would be an error,
// never a change. The store refuses writes itself before Pebble sees them (writable),
// with read_only.
func openReadOnly(dir string, fs vfs.FS, now func() time.Time, opts Options) (*Store, error) {
	if opts.Replicator != nil {
		return nil, errorf(CodeInvalid, nil, "a read-only store takes no replicator")
	}
	unhold, err := holdDir(dir, fs)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, fs: fs, now: now, readOnly: true, unhold: unhold, corrupted: make(chan struct{})}
	if err := s.openReadOnlyDB(opts); err != nil {
		unhold()
		return nil, err
	}
	if err := s.checkFormat(); err != nil {
		s.db.Close()
		if s.lock != nil {
			s.lock.Close()
		}
		unhold()
		return nil, err
	}
	return s, nil
}

// openReadOnlyDB opens Pebble on dir in read-only mode, or on an empty store in memory
// when dir holds no store.
func (s *Store) openReadOnlyDB(opts Options) error {
	fi, err := s.fs.Stat(s.dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return s.openEmpty(opts)
	case err != nil:
		return errorf(CodeIO, err, "open %s", s.dir)
	case !fi.IsDir():
		return errorf(CodeIO, syscall.ENOTDIR, "open %s", s.dir)
	}
	rofs := readOnlyFS{s.fs}
	lock, err := lockDir(s.dir, rofs)
	if err != nil {
		return err
	}
	s.lock = lock
	po := s.pebbleOptions(rofs, opts)
	po.ReadOnly = true
	err = s.openDB(po)
	if errors.Is(err, pebble.ErrDBDoesNotExist) {
		// The directory holds no MANIFEST: no store was ever opened in it.
		s.lock.Close()
		s.lock = nil
		return s.openEmpty(opts)
	}
	if err != nil {
		lock.Close()
		return err
	}
	return nil
}

// openEmpty makes s an empty store held in memory.
func (s *Store) openEmpty(opts Options) error {
	po := s.pebbleOptions(vfs.NewMem(), opts)
	po.Lock = nil
	return s.openDB(po)
}

// readOnlyFS is a file system that refuses every change: Pebble in read-only mode
// makes none, and this keeps it so.
type readOnlyFS struct{ vfs.FS }

func refuse(op, name string) error {
	return &iofs.PathError{Op: op, Path: name, Err: syscall.EROFS}
}

func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, refuse("create", name)
}
func (readOnlyFS) Link(oldname, _ string) error { return refuse("link", oldname) }
func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, refuse("open", name)
}
func (readOnlyFS) Remove(name string) error       { return refuse("remove", name) }
func (readOnlyFS) RemoveAll(name string) error    { return refuse("remove", name) }
func (readOnlyFS) Rename(oldname, _ string) error { return refuse("rename", oldname) }
func (readOnlyFS) ReuseForWrite(oldname, _ string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, refuse("open", oldname)
}
func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error { return refuse("mkdir", dir) }

// Lock locks the LOCK file shared (sharedLock) on the disk; another file system (a
// test's in-memory one) locks it its own way.
func (fs readOnlyFS) Lock(name string) (io.Closer, error) {
	if fs.FS != vfs.Default {
		return fs.FS.Lock(name)
	}
	return sharedLock(name)
}

// Unwrap is the file system readOnlyFS wraps.
func (fs readOnlyFS) Unwrap() vfs.FS { return fs.FS }

// noLock is the lock of a directory without a LOCK file.
type noLock struct{}

func (noLock) Close() error { return nil }

// held is the table of the store directories on the disk that a Store of this process
// has open. A lock on the LOCK file is a POSIX record lock, which belongs to the
// process: a second lock taken by the same process never conflicts with the first (it
// replaces it), and closing any descriptor of the file releases them all. So a second
// Store of this process on the same directory, read-only or not, is refused here,
// before it opens the LOCK file at all.
var held struct {
	sync.Mutex
	dirs map[string]bool
}

// holdDir enters dir in the table, or fails with in_use when a Store of this process
// has it open; release removes it. Directories on another file system are not entered.
func holdDir(dir string, fs vfs.FS) (release func(), err error) {
	if fs != vfs.Default {
		return func() {}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errorf(CodeIO, err, "open %s", dir)
	}
	held.Lock()
	defer held.Unlock()
	if held.dirs[abs] {
		return nil, errorf(CodeInUse, nil, "%s is in use by another Store of this process", dir)
	}
	if held.dirs == nil {
		held.dirs = map[string]bool{}
	}
	held.dirs[abs] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			delete(held.dirs, abs)
			held.Unlock()
		})
	}, nil
}
