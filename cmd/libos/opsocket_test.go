package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is a user ID other than the test's, for files planted by "another user".
const nobody = 65534

// TestOperatorSocketPlace: "a 0700 per-user directory ($XDG_RUNTIME_DIR/libos/, else a
// 0700 directory beside the store)"; the socket is created closed to group and others.
func TestOperatorSocketPlace(t *testing.T) {
	for _, c := range []struct {
		name    string
		runtime bool
	}{
		{"in $XDG_RUNTIME_DIR/libos when the session has a runtime directory", true},
		{"beside the store when it has none", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := shortTempDir(t)
			store := filepath.Join(base, "store")
			want := filepath.Join(base, ".libos-run")
			if c.runtime {
				rt := filepath.Join(base, "run")
				if err := os.Mkdir(rt, 0o700); err != nil {
					t.Fatal(err)
				}
				t.Setenv("XDG_RUNTIME_DIR", rt)
				want = filepath.Join(rt, "libos")
			} else {
				// Unset, or naming no directory, as in a session without one.
				t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "no-such-runtime-dir"))
			}
			ln, err := listenOperator(store)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if filepath.Dir(ln.path) != want {
				t.Fatalf("socket %s, want it in %s", ln.path, want)
			}
			di, err := os.Lstat(want)
			if err != nil || !di.IsDir() || di.Mode().Perm() != 0o700 {
				t.Fatalf("directory %s: %v %v", want, di.Mode(), err)
			}
			si, err := os.Lstat(ln.path)
			if err != nil || si.Mode().Type() != fs.ModeSocket || si.Mode().Perm() != 0o600 {
				t.Fatalf("socket %s: %v %v", ln.path, si.Mode(), err)
			}
			ents, _ := os.ReadDir(want)
			if len(ents) != 1 {
				t.Errorf("the directory holds %d entries, want only the socket (no temporary name left)", len(ents))
			}
			if got, err := findOperator(store); err != nil || got != ln.path {
				t.Fatalf("findOperator = %q, %v; want %q", got, err, ln.path)
			}
			// A client in another environment (no runtime directory) finds the
			// server too, or reports that none runs; it never picks another place.
			ln.remove()
			if _, err := findOperator(store); !errors.Is(err, errNoServer) {
				t.Fatalf("after remove: %v, want errNoServer", err)
			}
		})
	}
}

// TestOperatorSocketLongStorePath: a store whose path leaves no room for a socket
// beside it gets its socket in a private libos-UID directory of the temporary
// directory, found by the client there.
func TestOperatorSocketLongStorePath(t *testing.T) {
	tmp := shortTempDir(t)
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	store := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 4), "store")
	ln, err := listenOperator(store)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := filepath.Join(tmp, fmt.Sprintf("libos-%d", os.Geteuid()))
	if filepath.Dir(ln.path) != want {
		t.Fatalf("socket %s, want it in %s", ln.path, want)
	}
	if got, err := findOperator(store); err != nil || got != ln.path {
		t.Fatalf("findOperator = %q, %v", got, err)
	}
	ln.remove()
}

// TestOperatorSocketRefusals: "refuse to use a socket (client and server) unless Lstat
// shows it is a socket owned by the current user in a directory owned by the current
// user with mode 0700". Another local user may plant any of these; neither side may
// use it, and the server must not remove what is not its own.
func TestOperatorSocketRefusals(t *testing.T) {
	root := os.Geteuid() == 0
	cases := []struct {
		name     string
		needRoot bool
		// plant prepares dir (the operator directory, absent) and path (the socket
		// path in it) as the other user would.
		plant func(t *testing.T, dir, path string)
		// server: whether listenOperator must refuse too (a client-only refusal is
		// a socket the server may replace because it is the user's own).
		server bool
	}{
		{"the directory is open to group and others (0755)", false, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o755)
			plantSocket(t, path, 0o600)
		}, true},
		{"the directory is writable by everyone (1777, like /tmp)", false, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o777|os.ModeSticky)
			plantSocket(t, path, 0o600)
		}, true},
		{"the directory is a symbolic link to a private directory", false, func(t *testing.T, dir, path string) {
			real := dir + ".real"
			mkdir(t, real, 0o700)
			plantSocket(t, filepath.Join(real, filepath.Base(path)), 0o600)
			if err := os.Symlink(real, dir); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"the directory belongs to another user", true, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o700)
			plantSocket(t, path, 0o600)
			chown(t, path, nobody)
			chown(t, dir, nobody)
		}, true},
		{"the socket belongs to another user", true, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o700)
			plantSocket(t, path, 0o600)
			chown(t, path, nobody)
		}, true},
		{"the socket path is a regular file", false, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o700)
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"the socket path is a symbolic link to a socket", false, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o700)
			plantSocket(t, path+".real", 0o600)
			if err := os.Symlink(path+".real", path); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"the socket is open to group and others", false, func(t *testing.T, dir, path string) {
			mkdir(t, dir, 0o700)
			plantSocket(t, path, 0o666)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needRoot && !root {
				t.Skip("planting a file of another user needs root")
			}
			base := shortTempDir(t)
			t.Setenv("XDG_RUNTIME_DIR", "")
			store := filepath.Join(base, "store")
			dir := operatorDirs(store)[0]
			path := filepath.Join(dir, socketName(store))
			c.plant(t, dir, path)
			before, _ := os.Lstat(path)

			_, err := findOperator(store)
			if !errors.Is(err, errUnsafeOperatorSocket) {
				t.Fatalf("client: %v, want errUnsafeOperatorSocket", err)
			}
			if !strings.Contains(err.Error(), codeOperatorSocketUnsafe) {
				t.Errorf("client error without its code: %v", err)
			}
			r := libos(t, "", "ps", "--data", store)
			if r.code != exitUsage || !strings.Contains(r.stderr, codeOperatorSocketUnsafe) {
				t.Errorf("libos ps: exit %d, stderr %s", r.code, r.stderr)
			}

			ln, err := listenOperator(store)
			if !c.server {
				if err != nil {
					t.Fatalf("server: %v; the user's own socket is replaced", err)
				}
				ln.Close()
				return
			}
			if err == nil {
				ln.Close()
				t.Fatal("server: listened on an unsafe operator socket")
			}
			if !errors.Is(err, errUnsafeOperatorSocket) {
				t.Fatalf("server: %v, want errUnsafeOperatorSocket", err)
			}
			after, _ := os.Lstat(path)
			if before != nil && (after == nil || !os.SameFile(before, after)) {
				t.Errorf("the server removed or replaced %s, which is not its own", path)
			}
		})
	}
}

// shortTempDir is a temporary directory with a short path (t.TempDir's names hold
// the test's name, too long for a socket path).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// plantSocket leaves a socket file at path (bound, then closed without unlinking).
func plantSocket(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
