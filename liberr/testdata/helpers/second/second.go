// Package second has a second helper of every kind the one-helper scan must see.
package second

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentlibos/libos/liberr"
)

// clipText is a clip of its own, with the marker appended by hand.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// newID is an ID maker of its own.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keys is an exact-JSON reader of its own.
func keys(raw []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []string
	for dec.More() {
		t, _ := dec.Token()
		out = append(out, fmt.Sprint(t))
	}
	return out
}

// errorf is a constructor with logic of its own.
func errorf(code liberr.Code, msg string) *liberr.Error {
	if msg == "" {
		msg = string(code)
	}
	return liberr.New("second", code, "%s", msg)
}

// sentinel is one statement calling liberr: a thin constructor, allowed.
func sentinel(code liberr.Code) *liberr.Error { return liberr.New("second", code, "") }
