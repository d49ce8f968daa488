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
}
