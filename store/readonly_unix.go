//go:build unix

package store

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"syscall"
)

// sharedLock opens the LOCK file name for reading and takes a shared record lock on
// all of it, without waiting: a writer's lock (Pebble's, exclusive) makes it fail with
// EAGAIN or EACCES, as a shared one makes the writer's fail. A missing LOCK file is no
// lock (readonly.go).
func sharedLock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, iofs.ErrNotExist) {
		return noLock{}, nil
	}
	if err != nil {
		return nil, err
	}
	spec := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &spec); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
