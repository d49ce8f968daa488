package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentlibos/libos/internal/randid"
)

// Where the operator socket lives, and why a client may trust it.
//
// A socket in a shared directory under a predictable name can be planted by another
// local user, who would then receive the operator's approvals and answer 'ps' and
// 'events' with whatever they like. So the socket lives in a directory private to the
// user: $XDG_RUNTIME_DIR/libos when the session has a runtime directory, else
// .libos-run beside the store's directory (or, when a socket path there would be too
// long to bind, libos-UID in the temporary directory, as tmux does). Server and client both refuse a directory
// that is a symbolic link, is not owned by the current user or has a mode other than
// 0700, and a socket path that is not a socket owned by the current user and closed to
// group and others. The server binds under a temporary name in that directory,
// restricts the socket to 0600 and only then renames it to the name clients look for,
// so no client ever sees it open.

// codeOperatorSocketUnsafe is the machine code of errUnsafeOperatorSocket.
const codeOperatorSocketUnsafe = "operator_socket_unsafe"

// errUnsafeOperatorSocket: the operator socket or its directory fails the ownership
// and mode checks; nothing is sent to it and no server listens on it.
var errUnsafeOperatorSocket = errors.New("libos: operator socket is not private (" + codeOperatorSocketUnsafe + ")")

// unsafeSocket is an errUnsafeOperatorSocket naming the path and what is wrong with it.
type unsafeSocket struct {
	path   string
	reason string
}

func (e *unsafeSocket) Error() string {
	return fmt.Sprintf("libos: refusing the operator socket at %s: %s (%s)", e.path, e.reason, codeOperatorSocketUnsafe)
}

func (e *unsafeSocket) Is(target error) bool { return target == errUnsafeOperatorSocket }

// ErrorCode is the stable machine code of the error.
func (e *unsafeSocket) ErrorCode() string { return codeOperatorSocketUnsafe }

// maxSocketPath is the longest Unix socket path every supported system binds
// (sun_path is 108 bytes on Linux, 104 on the BSDs, both with a terminating NUL).
const maxSocketPath = 103

// socketName is the socket's file name for the store in dir: a digest of the store's
// absolute path, so stores that share a runtime directory never share a socket.
func socketName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:8]) + ".sock"
}

// operatorDirs are the directories that may hold the socket of the store in dir, in
// the order a server tries them: $XDG_RUNTIME_DIR/libos when XDG_RUNTIME_DIR is an
// absolute path to a directory; .libos-run beside the store; libos-UID in the temporary directory.
// A directory is left out when the socket's path in it would be too long to bind. A
// client looks in all of them, so a server started by an MCP client with a different
// environment is still found.
func operatorDirs(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var cands []string
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		if fi, err := os.Stat(rt); err == nil && fi.IsDir() {
			cands = append(cands, filepath.Join(rt, "libos"))
		}
	}
	cands = append(cands, filepath.Join(filepath.Dir(abs), ".libos-run"))
	cands = append(cands, filepath.Join(os.TempDir(), fmt.Sprintf("libos-%d", os.Geteuid())))
	name := socketName(dir)
	var dirs []string
	for _, d := range cands {
		if len(filepath.Join(d, name)) <= maxSocketPath && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// checkPrivateDir accepts dir only when Lstat shows a directory (not a symbolic link)
// owned by the current user with mode 0700. A missing directory is fs.ErrNotExist.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &unsafeSocket{dir, "its directory is a symbolic link"}
	case !fi.IsDir():
		return &unsafeSocket{dir, "its directory is not a directory"}
	}
	if err := checkOwner(dir, fi, "its directory"); err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		return &unsafeSocket{dir, fmt.Sprintf("its directory has mode %04o, not 0700 (chmod 700 %s, if it is yours)", fi.Mode().Perm(), dir)}
	}
	return nil
}

// checkSocket accepts path only when Lstat shows a socket owned by the current user
// that group and others cannot use. A missing socket is fs.ErrNotExist.
func checkSocket(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return nil, &unsafeSocket{path, fmt.Sprintf("it is not a socket (%s)", fi.Mode().Type())}
	}
	if err := checkOwner(path, fi, "it"); err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, &unsafeSocket{path, fmt.Sprintf("it has mode %04o, open to group or others", fi.Mode().Perm())}
	}
	return fi, nil
}

func checkOwner(path string, fi fs.FileInfo, what string) error {
	uid, ok := fileOwner(fi)
	if !ok {
		return &unsafeSocket{path, "its owner cannot be read on this system"}
	}
	if me := os.Geteuid(); uid != me {
		return &unsafeSocket{path, fmt.Sprintf("%s is owned by uid %d, not by the current user (uid %d)", what, uid, me)}
	}
	return nil
}

// ensurePrivateDir creates dir with mode 0700 when it is missing and checks it.
func ensurePrivateDir(dir string) error {
	err := checkPrivateDir(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	} else if err == nil {
		// The umask may have taken bits away; the directory is new and ours.
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return checkPrivateDir(dir)
}

// operatorListener is the listening operator socket of a server.
type operatorListener struct {
	net.Listener
	path string
	fi   fs.FileInfo // the socket as bound, to remove only this one
}

// listenOperator binds the operator socket of the store in dir, in the first of its
// operator directories. It refuses (with errUnsafeOperatorSocket) a directory or an
// existing socket path that fails the checks, and never removes what is not its own.
func listenOperator(dir string) (*operatorListener, error) {
	dirs := operatorDirs(dir)
	if len(dirs) == 0 {
		return nil, fmt.Errorf("libos: every operator socket path for %s is longer than %d bytes; set XDG_RUNTIME_DIR to a short private directory", dir, maxSocketPath)
	}
	sockDir := dirs[0]
	path := filepath.Join(sockDir, socketName(dir))
	if err := ensurePrivateDir(sockDir); err != nil {
		return nil, err
	}
	// A socket of ours at the path is a server's that stopped without removing it (the
	// store's lock, which this server holds, admits no other): replace it, whatever
	// its mode. Anything else there is left alone, and refused.
	switch fi, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, &unsafeSocket{path, fmt.Sprintf("it is not a socket (%s)", fi.Mode().Type())}
	default:
		if err := checkOwner(path, fi, "it"); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("libos: remove the stale operator socket: %w", err)
		}
	}
	// 16 of the ID's 32 hex digits: a Unix socket's path is bounded (108 bytes), and
	// the name only has to differ from a concurrent start's.
	tmp := filepath.Join(sockDir, "."+randid.New("")[:16]+".tmp")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (*operatorListener, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	fi, err := checkSocket(path)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &operatorListener{Listener: ln, path: path, fi: fi}, nil
}

// remove deletes the socket file if it is still the one this listener bound.
func (l *operatorListener) remove() {
	if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
		_ = os.Remove(l.path)
	}
}

// findOperator returns the socket of a server holding the store in dir: the first
// operator directory that holds a socket of the store, checked. errNoServer when none
// exists; errUnsafeOperatorSocket when a directory or socket fails the checks.
func findOperator(dir string) (string, error) {
	name := socketName(dir)
	for _, d := range operatorDirs(dir) {
		if err := checkPrivateDir(d); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", err
		}
		path := filepath.Join(d, name)
		if _, err := checkSocket(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", err
		}
		return path, nil
	}
	return "", errNoServer
}
