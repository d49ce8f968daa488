// Package third spells the clip marker again to recognise a clipped text, which the
// one-helper scan must see although nothing is appended.
package third

import "strings"

// marked reports whether s was cut by a clip, with a marker of its own.
func marked(s string) bool { return strings.HasSuffix(s, "…") }
