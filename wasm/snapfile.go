package wasm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// The prepared snapshot, kept beside the compilation cache.
//
// Building the state every call starts from (_initialize, then libos_prepare: a QuickJS
// runtime and context, the prelude and console evaluated) takes several milliseconds, as
// much as the rest of a short validation; a new process with a cache directory reads the
// snapshot the last one built instead. The file is used only when everything that shapes
// the snapshot matches: the format, the guest (its SHA-256), the memory cap and the wazero
// version, all recorded in the file as well as in its name; and its SHA-256 over
// everything before it must match, so a truncated, damaged or foreign file is never
// loaded. Any mismatch, or any error reading it, means a fresh prepare, whose snapshot then
// replaces the file. What is checked is integrity, not authorship: whoever can write the
// cache directory can already replace the machine code wazero loads from it.
//
// The layout is snapMagic, the key (guest SHA-256, 32 bytes; the memory cap, u64; the
// length of the wazero version, u8, and the version), from (u32), the snapshot's length
// (u32), the snapshot, and the SHA-256 of all that (32 bytes); integers little-endian.
const snapMagic = "libos snapshot 1"

// snapDirPrefix names the directory of the snapshots, followed by the wazero version,
// as wazero names its own.
const snapDirPrefix = "libos-snapshot-"

// snapKey is what a persisted snapshot must have been built with to be used.
type snapKey struct {
	guestSHA  [32]byte
	maxMemory int64
	wazero    string
}

// encode is the key as the file records it.
func (k snapKey) encode() []byte {
	b := make([]byte, 0, 32+8+1+len(k.wazero))
	b = append(b, k.guestSHA[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(k.maxMemory))
	b = append(b, byte(len(k.wazero)))
	return append(b, k.wazero...)
}

// path is where the snapshot of k lives under the cache directory dir: as wazero lays out
// its entries, a directory for the wazero version and a file named for the rest of the key.
func (k snapKey) path(dir string) string {
	sum := sha256.Sum256(binary.LittleEndian.AppendUint64(k.guestSHA[:], uint64(k.maxMemory)))
	return filepath.Join(dir, snapDirPrefix+k.wazero, hex.EncodeToString(sum[:]))
}

// wazeroVersion is the wazero version this binary links, as wazero reads it for the
// names of its own cache entries; "dev" when the build records none.
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				v := d.Version
				if d.Replace != nil {
					v = d.Replace.Version
				}
				if v != "" && v != "(devel)" && len(v) < 256 {
					return v
				}
			}
		}
	}
	return "dev"
}

// encodeSnapshot is the file holding snap, taken from address from, under key k.
func encodeSnapshot(k snapKey, from uint32, snap []byte) []byte {
	b := make([]byte, 0, len(snapMagic)+64+len(k.wazero)+8+len(snap)+sha256.Size)
	b = append(b, snapMagic...)
	b = append(b, k.encode()...)
	b = binary.LittleEndian.AppendUint32(b, from)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(snap)))
	b = append(b, snap...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// decodeSnapshot returns the snapshot a file holds and where it starts, if the file is
// whole, intact and made under key k, and the snapshot fits within the memory cap; ok is
// false otherwise. The snapshot aliases b.
func decodeSnapshot(k snapKey, b []byte) (snap []byte, from uint32, ok bool) {
	if len(b) < len(snapMagic)+sha256.Size {
		return nil, 0, false
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, 0, false
	}
	rest, found := bytes.CutPrefix(body, []byte(snapMagic))
	if !found {
		return nil, 0, false
	}
	rest, found = bytes.CutPrefix(rest, k.encode())
	if !found || len(rest) < 8 {
		return nil, 0, false
	}
	from = binary.LittleEndian.Uint32(rest)
	n := binary.LittleEndian.Uint32(rest[4:])
	snap = rest[8:]
	if uint64(len(snap)) != uint64(n) || n == 0 || uint64(from)+uint64(n) > uint64(k.maxMemory) {
		return nil, 0, false
	}
	return snap, from, true
}

// loadSnapshot reads the snapshot of k from the cache directory dir; ok is false when
// there is none that decodeSnapshot accepts.
func loadSnapshot(dir string, k snapKey) (snap []byte, from uint32, ok bool) {
	p := k.path(dir)
	fi, err := os.Stat(p)
	// A snapshot is about 400 KB; a file far larger than the cap is not one.
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > k.maxMemory+4096 {
		return nil, 0, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, 0, false
	}
	return decodeSnapshot(k, b)
}

// saveSnapshot writes the snapshot of k into the cache directory dir through a temporary
// file and a rename, so that a process reading it at the same time sees all of it or
// none. A snapshot that cannot be written costs only the prepare it would have saved.
func saveSnapshot(dir string, k snapKey, from uint32, snap []byte) error {
	p := k.path(dir)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(encodeSnapshot(k, from, snap))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// guestKey is the snapshot key of an engine running the guest whose hex SHA-256 is sha
// under the memory cap maxMemory.
func guestKey(sha string, maxMemory int64) (snapKey, bool) {
	k := snapKey{maxMemory: maxMemory, wazero: wazeroVersion()}
	raw, err := hex.DecodeString(strings.TrimSpace(sha))
	if err != nil || len(raw) != len(k.guestSHA) {
		return snapKey{}, false
	}
	copy(k.guestSHA[:], raw)
	return k, true
}
