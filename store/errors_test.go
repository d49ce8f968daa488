package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentlibos/libos/liberr"
)

// "errors.Is/As working across layers (a store error surfaced through engine and
// mcpserver is still errors.As-able and its code unchanged)": a store error wrapped by
// another layer keeps its code, is found by the store's sentinels and by IsCorrupt, and
// a verification failure, a finding about a log, is corrupt but not a damaged store.
func TestStoreErrorsSurviveOtherLayers(t *testing.T) {
	damaged := newError(CodeCorrupt, errors.New("crc mismatch"), "read events: "+CorruptAdvice)
	up := fmt.Errorf("mcp: %w", liberr.Wrap("engine", "storage_failed", damaged, "read events: %v", damaged))
	if !IsCorrupt(up) || !errors.Is(up, ErrCorrupt) {
		t.Errorf("a corrupt store error under an engine error is not seen: %v", up)
	}
	if e, ok := liberr.AsLayer(up, Layer); !ok || e != damaged {
		t.Errorf("AsLayer(store) = %v, %v", e, ok)
	}
	if got := liberr.CodeOf(up); got != "storage_failed" {
		t.Errorf("CodeOf = %q, want the outermost code", got)
	}
	if got, want := damaged.Error(), "store: read events: "+CorruptAdvice+": crc mismatch"; got != want {
		t.Errorf("Error() = %q, want %q (the cause's text ends the message)", got, want)
	}
	verr := liberr.Wrap("engine", "storage_failed", VerifyFailed("p", 7, "hash does not match the content"), "verify")
	var ve *VerifyError
	if !errors.As(verr, &ve) || ve.Seq != 7 || ve.PID != "p" || !errors.Is(verr, ErrCorrupt) {
		t.Errorf("a verify failure loses its position or its code: %v", verr)
	}
	if IsCorrupt(verr) {
		t.Error("IsCorrupt reports a log that fails verification as a damaged store")
	}
	if got, want := VerifyFailed("p", 7, "x").Error(), "store: event log of p fails verification at seq 7: x"; got != want {
		t.Errorf("VerifyFailed Error() = %q, want %q", got, want)
	}
}

// "Bad input gets a clear typed error": an ID the store can never hold is invalid,
// and the refusal quotes it clipped, whatever its size, in every reader that takes one.
func TestInvalidIDIsQuotedClipped(t *testing.T) {
	s, _ := openMem(t)
	huge := strings.Repeat("p", 64<<10)
	for _, id := range []string{huge, huge[:maxIDLen+1], "p\x00" + huge} {
		for name, read := range map[string]func() error{
			"Process": func() error { _, err := s.Process(id); return err },
			"Events":  func() error { _, err := s.Events(id, 0, 0); return err },
			"Verify":  func() error { return s.Verify(id) },
			"Journal": func() error { _, err := s.Journal("p", id); return err },
		} {
			err := read()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s of a %d-byte ID: %v, want invalid", name, len(id), err)
			}
			if n := len(err.Error()); n > 200 {
				t.Errorf("%s of a %d-byte ID: the error is %d bytes, it quotes the ID whole", name, len(id), n)
			}
		}
	}
}
