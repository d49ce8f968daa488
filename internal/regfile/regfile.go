package regfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// NotRegularError is the refusal of a path that names something other than a regular
// file; Kind says what, in words ("a FIFO", "a directory").
type NotRegularError struct{ Kind string }

func (e *NotRegularError) Error() string {
	return "regfile: not a regular file (" + e.Kind + ")"
}

// TooLargeError is the refusal of a file longer than the bound. Size is its size as
// stat gave it, or -1 when it grew past the bound while it was read.
type TooLargeError struct{ Size, Max int64 }

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("regfile: more than %d bytes", e.Max)
	}
	return fmt.Sprintf("regfile: %d bytes, more than %d", e.Size, e.Max)
}

// Read returns the content of the regular file at path, of at most max bytes. A path
// that is not a regular file is a *NotRegularError, a longer file a *TooLargeError; a
// failure to open, stat or read is the *os.PathError or error of that step.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Kind: Kind(fi.Mode())}
	}
	if fi.Size() > max {
		return nil, &TooLargeError{Size: fi.Size(), Max: max}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &TooLargeError{Size: -1, Max: max}
	}
	return b, nil
}

// Kind names a file mode's type in words.
func Kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "mode " + m.String()
}
