package seed

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// guestFile names, in the seed, the SHA-256 (hex) of the guest it was compiled from.
const guestFile = "GUEST_SHA256"

// Install writes the seed's cache entries that dir lacks, for the guest whose SHA-256 is
// guestSHA. It reports whether the seed matched that guest (false when there is no seed).
// Entries already in dir are left alone; each new one is written to a temporary file and
// renamed, so a process reading the cache at the same time sees all of an entry or none.
func Install(dir, guestSHA string) (bool, error) {
	if embedded == nil {
		return false, nil
	}
	return install(embedded, dir, guestSHA)
}

func install(fsys fs.FS, dir, guestSHA string) (bool, error) {
	want, err := fs.ReadFile(fsys, guestFile)
	if err != nil || strings.TrimSpace(string(want)) != guestSHA {
		return false, nil
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == guestFile {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if _, err := os.Lstat(dst); err == nil {
			return nil
		}
		return writeAtomic(fsys, p, dst)
	})
	if err != nil {
		return true, fmt.Errorf("seed: %w", err)
	}
	return true, nil
}

// writeAtomic copies the seed's file p to dst through a temporary file and a rename. It
// streams the file rather than reading it whole: the entry is 4 MB of machine code, and a
// copy of it on the Go heap of a process that exits a moment later only grows its peak
// memory and starts a garbage collection.
func writeAtomic(fsys fs.FS, p, dst string) error {
	src, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), path.Base(filepath.ToSlash(dst))+".*.tmp")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}

// Entries lists the seed's cache entries (slash-separated paths relative to a cache
// directory); none without a seed.
func Entries() []string {
	var out []string
	if embedded == nil {
		return nil
	}
	_ = fs.WalkDir(embedded, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != guestFile {
			out = append(out, p)
		}
		return nil
	})
	return out
}
