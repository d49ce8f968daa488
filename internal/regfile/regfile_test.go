//go:build unix

package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// "It opens without blocking, so a FIFO with no writer or a device never stalls the
// caller, and it never reads more than one byte past the bound."
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if err := os.WriteFile(large, []byte(strings.Repeat("x", 17)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(small, 16); err != nil || string(b) != "abc" {
		t.Fatalf("Read(small) = %q, %v", b, err)
	}
	if b, err := Read(small, 3); err != nil || string(b) != "abc" {
		t.Fatalf("Read(small) at its size = %q, %v", b, err)
	}
	var tooLarge *TooLargeError
	if _, err := Read(large, 16); !errors.As(err, &tooLarge) || tooLarge.Size != 17 || tooLarge.Max != 16 {
		t.Errorf("Read(large) = %v, want a TooLargeError of 17 > 16", err)
	}
	// /dev/zero is no regular file; its stat says so before a byte is read.
	for path, kind := range map[string]string{fifo: "a FIFO", "/dev/zero": "a character device", dir: "a directory"} {
		var notReg *NotRegularError
		if _, err := Read(path, 16); !errors.As(err, &notReg) || notReg.Kind != kind {
			t.Errorf("Read(%s) = %v, want NotRegularError %q", path, err, kind)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing"), 16); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want not exist", err)
	}
}
