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

// Ordered keeps New's shape (the prefix and 32 lowercase hex digits, never twice the
// same), and IDs made one after another sort one after another, bytewise: what the
// store's call-ID ceiling relies on to prove a new call ID absent without a read.
func TestOrderedShapeAndOrder(t *testing.T) {
	shape := regexp.MustCompile(`^call_[0-9a-f]{32}$`)
	prev := ""
	seen := map[string]bool{}
	for range 10000 {
		id := Ordered("call_")
		if !shape.MatchString(id) {
			t.Fatalf("Ordered = %q, want call_ and 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("Ordered returned %q twice", id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("Ordered returned %q after %q: not increasing", id, prev)
		}
		prev = id
	}
}
