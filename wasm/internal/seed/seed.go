package seed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The seed is one file, data/seed.pack, which scripts/build-seeded.sh writes and the
// binary embeds as a string: lines of text, an empty line, then the entries' bytes one
// after another, in the order the lines name them:
//
//	libos-seed 1
//	guest <SHA-256 of the guest, hex>
//	entry <slash-separated path in a cache directory> <length in bytes>
//	...
//
// One string rather than a directory of files, so that an entry's bytes are one range
// of the executable that the kernel can copy into the cache directory (copy.go) without
// this process reading them.
const packMagic = "libos-seed 1"

// entry is one cache entry of the seed: where it goes and its bytes (a part of packed).
type entry struct {
	path string
	data string
}

// pack is a parsed seed: the guest it was compiled from and its entries.
type pack struct {
	guest   string
	entries []entry
}

// parse reads a seed (the format above). Its entries' data are substrings of s.
func parse(s string) (pack, error) {
	header, body, ok := strings.Cut(s, "\n\n")
	if !ok {
		return pack{}, errors.New("no end of header")
	}
	lines := strings.Split(header, "\n")
	if lines[0] != packMagic {
		return pack{}, fmt.Errorf("not a seed: %q", lines[0])
	}
	var p pack
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "guest" && p.guest == "":
			p.guest = f[1]
		case len(f) == 3 && f[0] == "entry":
			n, err := strconv.Atoi(f[2])
			if err != nil || n < 0 || n > len(body) {
				return pack{}, fmt.Errorf("entry %s: bad length %q", f[1], f[2])
			}
			if !fs.ValidPath(f[1]) || f[1] == "." {
				return pack{}, fmt.Errorf("entry %q: not a relative path", f[1])
			}
			p.entries = append(p.entries, entry{path: f[1], data: body[:n]})
			body = body[n:]
		default:
			return pack{}, fmt.Errorf("bad header line %q", line)
		}
	}
	if p.guest == "" {
		return pack{}, errors.New("no guest line")
	}
	if len(body) != 0 {
		return pack{}, fmt.Errorf("%d bytes after the last entry", len(body))
	}
	return p, nil
}

// Install writes the seed's cache entries that dir lacks, for the guest whose SHA-256 is
// guestSHA. It reports whether the seed matched that guest (false when there is no seed).
// Entries already in dir are left alone; each new one is written to a temporary file and
// renamed, so a process reading the cache at the same time sees all of an entry or none.
func Install(dir, guestSHA string) (bool, error) {
	if packed == "" {
		return false, nil
	}
	p, err := parse(packed)
	if err != nil {
		return false, fmt.Errorf("seed: %w", err)
	}
	return install(p, dir, guestSHA)
}

func install(p pack, dir, guestSHA string) (bool, error) {
	if p.guest != guestSHA {
		return false, nil
	}
	for _, e := range p.entries {
		dst := filepath.Join(dir, filepath.FromSlash(e.path))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := writeAtomic(e.data, dst); err != nil {
			return true, fmt.Errorf("seed: %w", err)
		}
	}
	return true, nil
}

// writeAtomic writes data to dst through a temporary file and a rename. The bytes go
// from the executable's file to the new file inside the kernel when copyFromExecutable
// can do that (they are 4 MB of machine code, and reading them through this process
// maps every page of them into its memory); otherwise they are written from memory.
func writeAtomic(data, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), path.Base(filepath.ToSlash(dst))+".*.tmp")
	if err != nil {
		return err
	}
	if !copyFromExecutable(f, data) {
		_, err = f.WriteString(data)
	}
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
	p, err := parse(packed)
	if err != nil {
		return nil
	}
	out := make([]string, len(p.entries))
	for i, e := range p.entries {
		out[i] = e.path
	}
	return out
}
