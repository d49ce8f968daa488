package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// "Record in a generated, committed Go file the guest's sha256 ... A test fails when the
// embedded guest's sha256 differs from the recorded one." A guest rebuilt without
// guest_version.go (or the reverse) fails here, whoever rebuilt it.
func TestEmbeddedGuestMatchesRecordedSHA256(t *testing.T) {
	sum := sha256.Sum256(guestWasm)
	got := hex.EncodeToString(sum[:])
	if want := Guest().SHA256; got != want {
		t.Fatalf("embedded libos_guest.wasm has sha256 %s, guest_version.go records %s: run 'make guest' (it writes both)", got, want)
	}
	if got, want := int64(len(guestWasm)), Guest().Size; got != want {
		t.Fatalf("embedded libos_guest.wasm is %d bytes, guest_version.go records %d: run 'make guest' (it writes both)", got, want)
	}
}

// ABI.md: a later process reads the persisted snapshot only when its "guest, memory cap
// and runtime version match". The embedded guest's digest comes from its record; a guest
// copied in without its record (here: the embedded one with a custom section appended, so
// that its length differs) must be keyed by its own bytes, never by the record, or it
// would be given the recorded guest's snapshot.
func TestGuestDigestIgnoresStaleRecord(t *testing.T) {
	if got := guestDigest(guestWasm, Guest()); got != Guest().SHA256 {
		t.Fatalf("guestDigest(embedded guest, its record) = %s, want the recorded %s", got, Guest().SHA256)
	}
	// A custom section: id 0, size 5, name "x" (length 1), payload "abc".
	rebuilt := append(append([]byte(nil), guestWasm...), 0x00, 0x05, 0x01, 'x', 'a', 'b', 'c')
	sum := sha256.Sum256(rebuilt)
	if got, want := guestDigest(rebuilt, Guest()), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("guestDigest(other guest, stale record) = %s, want its own sha256 %s", got, want)
	}
	if got := guestDigest(guestWasm, GuestInfo{}); got != Guest().SHA256 {
		t.Fatalf("guestDigest(embedded guest, empty record) = %s, want its sha256 %s", got, Guest().SHA256)
	}
}

// Every field of the record is filled by the build: an empty one means the generator
// lost a value, and 'libos version' would print nothing for it.
func TestGuestInfoComplete(t *testing.T) {
	g := Guest()
	for name, v := range map[string]string{
		"SHA256": g.SHA256, "QuickJSRelease": g.QuickJSRelease, "QuickJSSource": g.QuickJSSource,
		"Clang": g.Clang, "WASILibc": g.WASILibc, "PatchSHA256": g.PatchSHA256, "SourcesSHA256": g.SourcesSHA256,
	} {
		if v == "" {
			t.Errorf("GuestInfo.%s is empty: run 'make guest'", name)
		}
	}
	if g.Size <= 0 {
		t.Errorf("GuestInfo.Size is %d: run 'make guest'", g.Size)
	}
}
