package liberr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// "errors.Is/As working across layers": an error of one layer matches another
// layer's sentinel of the same code, through wrapping, and errors.As finds the one
// type; CodeOf takes the outermost code, the one its maker meant.
func TestErrorsMatchAcrossLayers(t *testing.T) {
	inner := New("wasm", "limit_exceeded", "wall time")
	outer := Wrap("tools", "tool_failed", inner, "run failed")
	wrapped := fmt.Errorf("handler: %w", inner)
	if !errors.Is(wrapped, &Error{Code: "limit_exceeded", Layer: "engine"}) {
		t.Error("a sandbox limit_exceeded does not match the engine's sentinel")
	}
	if errors.Is(wrapped, &Error{Code: "tool_failed"}) {
		t.Error("codes match only themselves")
	}
	if e, ok := As(wrapped); !ok || e != inner {
		t.Errorf("As = %v, %v", e, ok)
	}
	if c := CodeOf(fmt.Errorf("x: %w", outer)); c != "tool_failed" {
		t.Errorf("CodeOf = %q, want the outermost code", c)
	}
	if c := CodeOf(errors.New("plain")); c != "" {
		t.Errorf("CodeOf(plain) = %q", c)
	}
	if got := outer.Error(); got != "tools: run failed" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Code: "unknown_syscall", Message: "unknown syscall"}).Error(); got != "unknown syscall" {
		t.Errorf("an error without a layer says only its message: %q", got)
	}
}

// "One clip helper ... (one cuts in the middle of a UTF-8 character)": Clip never
// splits a character and always returns valid UTF-8.
func TestClipKeepsCharacters(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"héllo", 2, "h…"}, // é is two bytes: cutting at 2 would split it
		{"😀😀", 5, "😀…"},
		{"a\xffb", 10, "a\uFFFDb"},
		{"", 0, ""},
	}
	for _, c := range cases {
		got := Clip(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		// "liberr.ClipMark: one exported spelling of the clip marker that Clip
		// appends": a cut text ends with it, and only a cut one.
		if cut := len(c.in) > c.n; strings.HasSuffix(got, ClipMark) != cut {
			t.Errorf("Clip(%q, %d) = %q: cut %v, ends with ClipMark %v", c.in, c.n, got, cut, !cut)
		}
	}
}

// "errors.Is/As working across layers": a layer finds its own error in a chain that
// other layers' errors wrap, and only its own.
func TestAsLayerFindsItsOwn(t *testing.T) {
	st := New("store", "io", "write failed")
	tl := Wrap("tools", "storage_failed", st, "persist")
	chain := fmt.Errorf("outer: %w", Wrap("engine", "tool_failed", tl, "call failed"))
	if e, ok := AsLayer(chain, "tools"); !ok || e != tl {
		t.Errorf("AsLayer(tools) = %v, %v", e, ok)
	}
	if e, ok := AsLayer(chain, "store"); !ok || e != st {
		t.Errorf("AsLayer(store) = %v, %v", e, ok)
	}
	if _, ok := AsLayer(chain, "wasm"); ok {
		t.Error("AsLayer found a layer that is not in the chain")
	}
	if e, ok := AsLayer(errors.Join(errors.New("x"), st), "store"); !ok || e != st {
		t.Errorf("AsLayer through a join = %v, %v", e, ok)
	}
	if c := CodeOr(errors.New("plain"), "tool_failed"); c != "tool_failed" {
		t.Errorf("CodeOr(plain) = %q", c)
	}
	if c := CodeOr(nil, "tool_failed"); c != "" {
		t.Errorf("CodeOr(nil) = %q", c)
	}
	if c := CodeOr(chain, "tool_failed"); c != "tool_failed" {
		t.Errorf("CodeOr(chain) = %q, want the outermost code", c)
	}
}
