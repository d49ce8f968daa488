package randid

import (
	"regexp"
	"testing"
)

// The IDs the module checks on input (tools: "tcand_" and 32 hex digits; the store's
// checkID) are what New makes: the prefix, then 32 lowercase hex digits, never twice
// the same.
func TestNewShape(t *testing.T) {
	shape := regexp.MustCompile(`^tcand_[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New("tcand_")
		if !shape.MatchString(id) {
			t.Fatalf("New = %q, want tcand_ and 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("New returned %q twice", id)
		}
		seen[id] = true
	}
	if got := New(""); len(got) != 32 {
		t.Errorf("New(\"\") = %q, want 32 hex digits", got)
	}
}
