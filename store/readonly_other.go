//go:build !unix

package store

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// sharedLock is, where there are no shared record locks, the writer's lock: exclusive,
// on a LOCK file that exists (a missing one is no lock, readonly.go).
func sharedLock(name string) (io.Closer, error) {
	if _, err := os.Stat(name); errors.Is(err, iofs.ErrNotExist) {
		return noLock{}, nil
	}
	return vfs.Default.Lock(name)
}
