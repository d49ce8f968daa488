package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// "data is the compacted JSON object exactly as stored": the hand-written encoding of
// an event record must be byte for byte what encoding/json (HTML escaping off) writes,
// or Verify would read back other bytes than were hashed.
func TestEventRecordEncodingMatchesMarshal(t *testing.T) {
	hash := bytes.Repeat([]byte{0xfb}, HashSize)
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	cases := []struct {
		name string
		r    eventRecord
	}{
		{"plain", eventRecord{PID: "p1", Seq: 1, Type: "tool_called", Time: at, Data: json.RawMessage(`{"call_id":"c1"}`), PrevHash: zeroHash, Hash: hash}},
		{"whole seconds", eventRecord{PID: "p1", Seq: 1 << 40, Type: "note", Time: at.Truncate(time.Second), Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"html and unicode in data", eventRecord{PID: "p", Seq: 2, Type: "note", Time: at, Data: json.RawMessage(`{"h":"<a>&amp;</a>","u":"\u2028 ` + "\u2028" + ` é 日本"}`), PrevHash: hash, Hash: hash}},
		{"html in pid and type", eventRecord{PID: "<p&q>", Seq: 3, Type: "a>b", Time: at, Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"quote and backslash in pid", eventRecord{PID: `p"\q`, Seq: 3, Type: "t", Time: at, Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"line separator in type", eventRecord{PID: "p", Seq: 3, Type: "a\u2028b\u2029", Time: at, Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"non-ASCII pid", eventRecord{PID: "prozeß-日本", Seq: 4, Type: "t", Time: at, Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"DEL in pid", eventRecord{PID: "p\x7f", Seq: 4, Type: "t", Time: at, Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"other zone", eventRecord{PID: "p", Seq: 5, Type: "t", Time: at.In(time.FixedZone("X", 3600)), Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
		{"nil hashes", eventRecord{PID: "p", Seq: 5, Type: "t", Time: at, Data: json.RawMessage(`{}`)}},
		{"year zero", eventRecord{PID: "p", Seq: 5, Type: "t", Time: time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC), Data: json.RawMessage(`{}`), PrevHash: hash, Hash: hash}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, werr := marshal(tc.r)
			got, gerr := encodeEventRecord(tc.r)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("encodeEventRecord = %s, %v\nmarshal           = %s, %v", got, gerr, want, werr)
			}
		})
	}
}
