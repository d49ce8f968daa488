package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable makes a string from a candidate (its name, a diagnostic's message, a thrown
// error, console output, an observed value) safe to print as part of one line of text:
// every rune that is not graphic — line breaks, C0 and C1 controls (ESC and CSI start
// terminal sequences), DEL, format characters such as the bidirectional overrides,
// line and paragraph separators — and every invalid byte is written as a Go escape
// (\n, \x1b, \u202e). A candidate can then neither start a line of its own (a forged
// "--- PASS" or "N passed, 0 failed") nor drive the terminal. JSON and JUnit output
// escape by their own rules.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsGraphic(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

// fileText is a file name as the text report prints it, at the start of a line: as
// given when it is made of ordinary path characters, quoted (Go syntax) otherwise, so
// that a file named "--- PASS: x" or "3 passed, 0 failed" cannot pose as a report line.
func fileText(file string) string {
	for _, r := range file {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/+@~=,-", r)) {
			return strconv.Quote(file)
		}
	}
	if file == "" {
		return `""`
	}
	return file
}
