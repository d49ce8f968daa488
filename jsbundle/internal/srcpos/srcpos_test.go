package srcpos

import (
	"errors"
	"testing"
)

// Lines end at LF, CR, CRLF, U+2028 and U+2029, as in ECMAScript and esbuild; columns are
// 1-based UTF-16 units.
func TestPosition(t *testing.T) {
	text := "ab\ncd\r\nef\rg\u2028h😀x\u2029y"
	x := NewIndex(text)
	for _, c := range []struct {
		name      string
		off       int
		line, col int
	}{
		{"start", 0, 1, 1},
		{"LF ends a line", 3, 2, 1},
		{"CRLF is one line end", 7, 3, 1},
		{"CR ends a line", 10, 4, 1},
		{"U+2028 ends a line", 14, 5, 1},
		{"astral rune counts two UTF-16 units", 19, 5, 4},
		{"U+2029 ends a line", 23, 6, 1},
		{"past the end clamps", 1000, 6, 2},
	} {
		if l, col := x.Position(c.off); l != c.line || col != c.col {
			t.Errorf("%s: Position(%d) = %d:%d, want %d:%d", c.name, c.off, l, col, c.line, c.col)
		}
	}
	if x.LineCount() != 6 || x.Line(2) != "cd" || x.Line(5) != "h😀x" || x.Line(7) != "" {
		t.Errorf("lines: %d %q %q", x.LineCount(), x.Line(2), x.Line(5))
	}
	if got := ByteColumnToUTF16("a😀b", 5); got != 3 {
		t.Errorf("ByteColumnToUTF16 = %d, want 3", got)
	}
}

func TestSourceMap(t *testing.T) {
	// Generated line 0: col 0 → (0,0); col 4 → (0,2). Line 1 empty. Line 2: col 2 → (3,5).
	m, err := ParseSourceMap([]byte(`{"version":3,"sources":["a.ts"],"mappings":"AAAA,IAAE;;EAGG"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gl, gc, ol, oc int
	}{
		{0, 0, 0, 0}, {0, 3, 0, 0}, {0, 4, 0, 2}, {0, 9, 0, 2},
		{1, 0, 0, 2}, // no segment on the line: the nearest earlier one
		{2, 2, 3, 5}, {2, 7, 3, 5},
	} {
		ol, oc, ok := m.Original(c.gl, c.gc)
		if !ok || ol != c.ol || oc != c.oc {
			t.Errorf("Original(%d,%d) = %d,%d,%v want %d,%d", c.gl, c.gc, ol, oc, ok, c.ol, c.oc)
		}
	}
	for _, bad := range []string{
		`{"version":2,"mappings":""}`,
		`{"version":3,"mappings":"A!AA"}`,
		`{"version":3,"mappings":"AA"}`,
		`{"version":3,"mappings":"AAAg"}`,
		`{"version":3,"mappings":"ACAA"}`,
		`not json`,
	} {
		if _, err := ParseSourceMap([]byte(bad)); !errors.Is(err, ErrSourceMap) {
			t.Errorf("%s: err = %v, want ErrSourceMap", bad, err)
		}
	}
}
