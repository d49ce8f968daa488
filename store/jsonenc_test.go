package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// "marshal encodes without HTML escaping so that stored JSON keeps the exact bytes that
// were hashed": the ToolResult record written without reflection is byte for byte what
// marshal writes, for strings with quotes, backslashes, every control character,
// invalid UTF-8, U+2028/U+2029, HTML characters and multi-byte runes, structured
// results with and without whitespace, empty, null, and times at the range's edges;
// where marshal fails, the fast encoding declines.
func TestToolResultEncodingIsMarshals(t *testing.T) {
	pieces := []string{"", "a", `"`, `\`, "<>&", "\u2028", "\u2029", "é", "日本", "\U0001F600", "\xff", "\xe2\x80", "\x7f", "{\"sum\":42}", " "}
	for c := 0; c < 0x20; c++ {
		pieces = append(pieces, string(rune(c)))
	}
	structured := []string{``, `{"sum":42}`, ` { "a" : [1, 2.50, "x"] } `, `null`, `"s"`, `{"a":"<&>\u2028"}`, `{`, `[1,]`, `{} x`}
	times := []time.Time{
		time.Date(2026, 12, 2, 4, 5, 6, 789000000, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	str := func() string {
		var b []byte
		for range rng.IntN(6) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	checked := 0
	for i := range 20000 {
		r := ToolResult{PID: str(), CallID: str(), Tool: str(), Text: str(), IsError: rng.IntN(2) == 0,
			Structured: json.RawMessage(structured[i%len(structured)]), Created: times[rng.IntN(len(times))]}
		want, werr := marshal(r)
		got, ok := appendToolResult([]byte("prefix"), &r)
		if !ok {
			if werr == nil && json.Valid(r.Structured) {
				t.Fatalf("%+v: declined, marshal wrote %s", r, want)
			}
			if string(got) != "prefix" {
				t.Fatalf("declined but appended %q", got)
			}
			continue
		}
		if werr != nil {
			t.Fatalf("%+v: marshal failed (%v), the fast encoding wrote %s", r, werr, got)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("%+v:\n got %s\nwant %s", r, got[len("prefix"):], want)
		}
		checked++
	}
	if checked < 5000 {
		t.Fatalf("only %d of 20000 encoded", checked)
	}
}
