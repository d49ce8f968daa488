package syscalls

import (
	"testing"

	"github.com/agentlibos/libos/internal/jsonexact"
)

func equalJSON(a, b []byte) (bool, error) { return jsonexact.EqualJSON(a, b) }

// mustPolicy compiles spec, which the test means to be good.
func mustPolicy(t testing.TB, spec PolicySpec) *Policy {
	t.Helper()
	p, probs := CompilePolicy(spec)
	if probs != nil {
		t.Fatalf("CompilePolicy: %+v", probs)
	}
	return p
}
