package seed

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// copyFromExecutable copies data, which must be bytes of this program's executable as
// mapped into memory (an embedded string), to dst's current position, by reading the
// executable's file where the mapping says they are (/proc/self/maps), so that the
// kernel copies them file to file (copy_file_range, else sendfile) and this process never
// touches their pages. It reports false, having written nothing, when data is not in the
// executable's mapping, when the file there does not hold data's first and last bytes,
// or when the copy fails; the caller then writes data itself.
func copyFromExecutable(dst *os.File, data string) bool {
	if len(data) < 2*sample {
		return false
	}
	exe, err := os.Open("/proc/self/exe") // the running image, even if its path was replaced since
	if err != nil {
		return false
	}
	defer exe.Close()
	fi, err := exe.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	off, ok := executableOffset(uintptr(unsafe.Pointer(unsafe.StringData(data))), len(data), uint64(st.Dev), st.Ino)
	if !ok || !holds(exe, off, data) {
		return false
	}
	start, err := dst.Seek(0, io.SeekCurrent)
	if err != nil {
		return false
	}
	if _, err := exe.Seek(off, io.SeekStart); err != nil {
		return false
	}
	// *os.File's ReadFrom copies from a *io.LimitedReader of a *os.File in the kernel.
	n, err := dst.ReadFrom(&io.LimitedReader{R: exe, N: int64(len(data))})
	if err != nil || n != int64(len(data)) {
		// Leave dst as it was, for the caller's own write.
		_ = dst.Truncate(start)
		_, _ = dst.Seek(start, io.SeekStart)
		return false
	}
	return true
}

// sample is how many bytes at each end of a range holds compares.
const sample = 64

// holds reports whether the file f holds data's first and last sample bytes at off.
func holds(f *os.File, off int64, data string) bool {
	var b [sample]byte
	if _, err := f.ReadAt(b[:], off); err != nil || string(b[:]) != data[:sample] {
		return false
	}
	if _, err := f.ReadAt(b[:], off+int64(len(data)-sample)); err != nil || string(b[:]) != data[len(data)-sample:] {
		return false
	}
	return true
}

// executableOffset finds the file offset of the n bytes at addr in a mapping of the file
// (dev, ino), from /proc/self/maps; false when no one mapping of that file holds them.
func executableOffset(addr uintptr, n int, dev, ino uint64) (int64, bool) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[4] != strconv.FormatUint(ino, 10) || !sameDev(f[3], dev) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if uint64(addr) >= start && uint64(addr)+uint64(n) <= end {
			return int64(off + uint64(addr) - start), true
		}
	}
	return 0, false
}

// sameDev reports whether a device as /proc/self/maps prints it ("major:minor" in hex)
// is dev.
func sameDev(printed string, dev uint64) bool {
	maj, min, ok := strings.Cut(printed, ":")
	if !ok {
		return false
	}
	a, err1 := strconv.ParseUint(maj, 16, 32)
	b, err2 := strconv.ParseUint(min, 16, 32)
	return err1 == nil && err2 == nil && uint32(a) == unix.Major(dev) && uint32(b) == unix.Minor(dev)
}
