package srcpos

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Index answers position questions about one text.
type Index struct {
	text  string
	lines []int // byte offset where each line starts
}

// NewIndex builds an index of the line starts of text.
func NewIndex(text string) *Index {
	lines := []int{0}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\n':
			i++
			lines = append(lines, i)
		case c == '\r':
			i++
			if i < len(text) && text[i] == '\n' {
				i++
			}
			lines = append(lines, i)
		case c == 0xE2 && i+2 < len(text) && text[i+1] == 0x80 && (text[i+2] == 0xA8 || text[i+2] == 0xA9):
			i += 3
			lines = append(lines, i)
		default:
			i++
		}
	}
	return &Index{text: text, lines: lines}
}

// Position returns the 1-based line and the 1-based UTF-16 column of byte offset off.
// Offsets past the end are clamped to the end of the text.
func (x *Index) Position(off int) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > len(x.text) {
		off = len(x.text)
	}
	lo, hi := 0, len(x.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if x.lines[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, UTF16Len(x.text[x.lines[lo]:off]) + 1
}

// LineCount returns the number of lines of the text.
func (x *Index) LineCount() int { return len(x.lines) }

// Line returns the text of 1-based line n without its terminator, or "" when out of range.
func (x *Index) Line(n int) string {
	if n < 1 || n > len(x.lines) {
		return ""
	}
	start := x.lines[n-1]
	end := len(x.text)
	if n < len(x.lines) {
		end = x.lines[n]
	}
	s := x.text[start:end]
	for len(s) > 0 {
		switch {
		case s[len(s)-1] == '\n' || s[len(s)-1] == '\r':
			s = s[:len(s)-1]
		case len(s) >= 3 && s[len(s)-3] == 0xE2 && s[len(s)-2] == 0x80 && (s[len(s)-1] == 0xA8 || s[len(s)-1] == 0xA9):
			s = s[:len(s)-3]
		default:
			return s
		}
	}
	return s
}

// UTF16Len returns the length of s in UTF-16 code units. Invalid bytes count as one unit
// each, as U+FFFD would.
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if utf16.RuneLen(r) == 2 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// ByteColumnToUTF16 converts a 0-based byte column within line into a 0-based UTF-16
// column. Columns past the end of the line extend it with one unit per byte.
func ByteColumnToUTF16(line string, col int) int {
	if col <= 0 {
		return 0
	}
	if col > len(line) {
		return UTF16Len(line) + col - len(line)
	}
	return UTF16Len(line[:col])
}
