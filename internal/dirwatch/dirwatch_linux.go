//go:build linux

package dirwatch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Op is what happened to an entry.
type Op int

const (
	// Create: the entry appeared (created, or moved in).
	Create Op = iota + 1
	// Remove: the entry disappeared (removed, or moved out).
	Remove
)

func (o Op) String() string {
	switch o {
	case Create:
		return "create"
	case Remove:
		return "remove"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event is one entry created or removed, with its path (the watched root joined with
// the path below it).
type Event struct {
	Op   Op
	Path string
}

func (e Event) String() string { return e.Op.String() + " " + e.Path }

// Watcher records the events of one tree until Stop.
type Watcher struct {
	fd   int
	wake [2]int // a pipe: Stop writes to wake[1] to end the reader's poll
	done chan struct{}

	mu     sync.Mutex
	dirs   map[int]string // watch descriptor → directory
	events []Event
	// scanned are the entries found by the scan of a directory created while
	// watched (they may predate its watch); an event for one of them that follows
	// is the same creation and is dropped.
	scanned map[string]bool
	err     error
}

const mask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// Watch starts recording the entries created in and removed from the tree at root,
// which must be an existing directory, at any depth.
func Watch(root string) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("dirwatch: inotify: %w", err)
	}
	w := &Watcher{fd: fd, done: make(chan struct{}), dirs: map[int]string{}, scanned: map[string]bool{}}
	if err := unix.Pipe2(w.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dirwatch: pipe: %w", err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return w.add(p)
	})
	if err != nil {
		w.closeFDs()
		return nil, fmt.Errorf("dirwatch: watch %s: %w", root, err)
	}
	go w.read()
	return w, nil
}

// Stop reads the events still queued, stops watching and returns every event in the
// order the kernel gave them, or the error that made the record incomplete (the
// kernel's queue overflowed, a directory could not be watched).
func (w *Watcher) Stop() ([]Event, error) {
	unix.Write(w.wake[1], []byte{0})
	<-w.done
	w.closeFDs()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events, w.err
}

func (w *Watcher) closeFDs() {
	unix.Close(w.fd)
	unix.Close(w.wake[0])
	unix.Close(w.wake[1])
}

// add watches the directory dir.
func (w *Watcher) add(dir string) error {
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.dirs[wd] = dir
	w.mu.Unlock()
	return nil
}

// read handles the queued events whenever there are some, until Stop wakes it; it
// then handles what is left in the queue and ends.
func (w *Watcher) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			w.fail(fmt.Errorf("dirwatch: poll: %w", err))
			return
		}
		stopping := fds[1].Revents != 0
		if !w.drain(buf) || stopping {
			return
		}
	}
}

// drain handles the events queued now; false on an error.
func (w *Watcher) drain(buf []byte) bool {
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return true
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			w.fail(fmt.Errorf("dirwatch: read: %w", err))
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			w.handle(int(ev.Wd), ev.Mask, string(name))
		}
	}
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// handle records one event. A directory that appears is watched at once, and what it
// already holds (created before the watch) is recorded as created too.
func (w *Watcher) handle(wd int, m uint32, name string) {
	if m&unix.IN_Q_OVERFLOW != 0 {
		w.fail(errors.New("dirwatch: the kernel's event queue overflowed; events were lost"))
		return
	}
	w.mu.Lock()
	dir, ok := w.dirs[wd]
	if m&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd)
	}
	w.mu.Unlock()
	if !ok || name == "" {
		return
	}
	p := filepath.Join(dir, name)
	switch {
	case m&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.mu.Lock()
		dup := w.scanned[p]
		delete(w.scanned, p)
		if !dup {
			w.events = append(w.events, Event{Create, p})
		}
		w.mu.Unlock()
		// A directory a scan found is watched and scanned already: its watch came
		// before the scan read it, so what it holds is recorded or will be an event.
		// Scanning it again would record its entries twice.
		if m&unix.IN_ISDIR != 0 && !dup {
			w.addNew(p)
		}
	case m&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.mu.Lock()
		delete(w.scanned, p)
		w.events = append(w.events, Event{Remove, p})
		w.mu.Unlock()
	}
}

// addNew watches a directory that appeared while watched, with every directory below
// it, and records the entries it holds already.
func (w *Watcher) addNew(dir string) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile: its removal is an event of its own
		}
		if err != nil {
			return err
		}
		if p != dir {
			w.mu.Lock()
			if !w.scanned[p] { // found by an earlier scan whose event is still to come
				w.scanned[p] = true
				w.events = append(w.events, Event{Create, p})
			}
			w.mu.Unlock()
		}
		if d.IsDir() {
			if err := w.add(p); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.fail(fmt.Errorf("dirwatch: watch %s: %w", dir, err))
	}
}

func (w *Watcher) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// Created returns the paths of the Create events, in order.
func Created(events []Event) []string {
	var out []string
	for _, e := range events {
		if e.Op == Create {
			out = append(out, e.Path)
		}
	}
	return out
}

// CountCreated counts the entries created whose base name starts with prefix.
func CountCreated(events []Event, prefix string) int {
	n := 0
	for _, p := range Created(events) {
		if strings.HasPrefix(filepath.Base(p), prefix) {
			n++
		}
	}
	return n
}
