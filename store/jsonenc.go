package store

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// appendToolResult appends the JSON encoding of r to dst, byte for byte what marshal
// (encoding/json without HTML escaping) writes, without reflection: a call's settlement
// writes one ToolResult, and encoding/json's reflective walk was a third of building
// that batch. It reports false, having appended nothing, when it cannot give exactly
// marshal's bytes (Structured that is not JSON, a time encoding/json refuses); the
// caller then uses marshal. TestToolResultEncodingIsMarshals holds the equivalence.
func appendToolResult(dst []byte, r *ToolResult) ([]byte, bool) {
	if y := r.Created.Year(); y < 0 || y > 9999 {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, `{"pid":`...)
	dst = appendJSONString(dst, r.PID)
	dst = append(dst, `,"call_id":`...)
	dst = appendJSONString(dst, r.CallID)
	dst = append(dst, `,"tool":`...)
	dst = appendJSONString(dst, r.Tool)
	if len(r.Structured) > 0 {
		dst = append(dst, `,"structured":`...)
		// encoding/json compacts a RawMessage into its output, and fails on one that is
		// not JSON.
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, r.Structured); err != nil {
			return dst[:start], false
		}
		dst = buf.Bytes()
	}
	dst = append(dst, `,"text":`...)
	dst = appendJSONString(dst, r.Text)
	if r.IsError {
		dst = append(dst, `,"is_error":true`...)
	}
	dst = append(dst, `,"created":"`...)
	dst = r.Created.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `"}`...)
	return dst, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML escaping off:
// quotes and backslashes escaped, control characters as \b \f \n \r \t or \u00xx,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, everything else as is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = jsonexact.AppendEscapedByte(append(dst, s[start:i]...), b)
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
