package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// compiled is the machine code of one module as wazero's optimising compiler (wazevo) laid
// it out: every locally defined function at its offset in one executable block, in the
// order of the module's code section.
type compiled struct {
	offsets    []int // offsets[i] is where local function i starts in code
	code       []byte
	cacheFile  string
	wazeroName string // the version string the cache entry was written by
}

// wazevoMagic opens every cache entry of wazevo (internal/engine/wazevo/engine_cache.go):
// magic, one byte of version length, the version, a uint32 function count, that many
// uint64 offsets, a uint64 code length, the code, its CRC32-C, then optional tables.
var wazevoMagic = []byte("WAZEVO")

// parseCacheEntry reads one entry of wazero 1.12's file cache.
func parseCacheEntry(b []byte) (*compiled, error) {
	if !bytes.HasPrefix(b, wazevoMagic) || len(b) < len(wazevoMagic)+1 {
		return nil, errors.New("not a wazevo cache entry")
	}
	p := len(wazevoMagic)
	vlen := int(b[p])
	p++
	if len(b) < p+vlen+4 {
		return nil, errors.New("truncated header")
	}
	c := &compiled{wazeroName: string(b[p : p+vlen])}
	p += vlen
	n := int(binary.LittleEndian.Uint32(b[p:]))
	p += 4
	if len(b) < p+8*n+8 {
		return nil, fmt.Errorf("truncated offsets (%d functions)", n)
	}
	c.offsets = make([]int, n)
	for i := range c.offsets {
		c.offsets[i] = int(binary.LittleEndian.Uint64(b[p:]))
		p += 8
	}
	clen := int(binary.LittleEndian.Uint64(b[p:]))
	p += 8
	if clen < 0 || len(b) < p+clen {
		return nil, fmt.Errorf("truncated code (%d bytes)", clen)
	}
	c.code = b[p : p+clen]
	if !sort.IntsAreSorted(c.offsets) || (n > 0 && c.offsets[n-1] >= clen) {
		return nil, errors.New("function offsets out of order or past the code")
	}
	return c, nil
}

// readCache finds the largest wazevo entry under dir (the guest; host modules are never
// cached) and parses it.
func readCache(dir string) (*compiled, error) {
	var best string
	var size int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil && info.Size() > size {
			best, size = path, info.Size()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if best == "" {
		return nil, fmt.Errorf("no cache entry under %s", dir)
	}
	b, err := os.ReadFile(best)
	if err != nil {
		return nil, err
	}
	c, err := parseCacheEntry(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", best, err)
	}
	c.cacheFile = best
	return c, nil
}

// function returns the local function whose code holds offset off, and off's offset in it.
func (c *compiled) function(off int) (fn, in int) {
	i := sort.Search(len(c.offsets), func(i int) bool { return c.offsets[i] > off }) - 1
	if i < 0 {
		return -1, off
	}
	return i, off - c.offsets[i]
}

// size is the length of local function fn's code (up to the next function's start; the
// padding to 16 bytes is included).
func (c *compiled) size(fn int) int {
	if fn+1 < len(c.offsets) {
		return c.offsets[fn+1] - c.offsets[fn]
	}
	return len(c.code) - c.offsets[fn]
}

// findMapping returns the address at which process pid has c's code mapped: among its
// executable anonymous mappings, the one whose bytes are c's code, compared byte for
// byte through /proc/PID/mem, so that a sample is attributed only to code proven to be
// this module's.
func findMapping(pid int, c *compiled) (uint64, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	sc := bufio.NewScanner(bytes.NewReader(maps))
	buf := make([]byte, len(c.code))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.Contains(f[1], "x") || (len(f) > 5 && f[5] != "") {
			continue // not executable, or file-backed
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end-start < uint64(len(c.code)) {
			continue
		}
		if _, err := mem.ReadAt(buf, int64(start)); err != nil {
			continue
		}
		if bytes.Equal(buf, c.code) {
			return start, nil
		}
	}
	return 0, fmt.Errorf("process %d maps no copy of the %d bytes of %s", pid, len(c.code), c.cacheFile)
}
