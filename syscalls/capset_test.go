package syscalls

import (
	"slices"
	"testing"
)

// "Capabilities the process held when the call was opened" (engine.Call): Strings is
// the set as it is now, sorted, after every Grant and Revoke, though it is kept
// between changes; appending to what it returned never changes the next answer.
func TestCapSetStringsFollowsChanges(t *testing.T) {
	s := NewCapSet("kv:write", "clock:now")
	want := func(caps ...string) {
		t.Helper()
		if got := s.Strings(); !slices.Equal(got, caps) {
			t.Fatalf("Strings() = %v, want %v", got, caps)
		}
	}
	want("clock:now", "kv:write")
	_ = append(s.Strings(), "net:fetch")
	want("clock:now", "kv:write")
	s.Grant("kv:read")
	want("clock:now", "kv:read", "kv:write")
	s.Revoke("clock:now")
	want("kv:read", "kv:write")
	s.Revoke("kv:read")
	s.Revoke("kv:write")
	want()
}
