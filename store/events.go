package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// Event types the store correlates. Any other non-empty type is stored as is.
const (
	EventToolCalled        = "tool_called"
	EventToolResult        = "tool_result"
	EventToolFailed        = "tool_failed"
	EventUnknownSettlement = "unknown_settlement"
)

// CallIDField is the top-level field of an event's Data that correlates a
// tool_called event with its settlement (tool_result, tool_failed or
// unknown_settlement). Those four types must carry it as a non-empty string.
const CallIDField = "call_id"

// HashSize is the size of an event hash (SHA-256).
const HashSize = sha256.Size

// Event is one entry of a process's append-only event log.
type Event struct {
	PID      string          `json:"pid"`
	Seq      uint64          `json:"seq"` // 1, 2, 3, … dense per process
	Type     string          `json:"type"`
	CallID   string          `json:"call_id,omitempty"` // Data's call_id, when present
	Time     time.Time       `json:"time"`
	Data     json.RawMessage `json:"data"`      // a JSON object, compacted
	PrevHash []byte          `json:"prev_hash"` // Hash of event Seq-1; zeros for Seq 1
	Hash     []byte          `json:"hash"`      // SHA-256 over the canonical encoding
}

// Head is the last event of a process's log: its sequence number and hash (zero
// and 32 zero bytes for an empty log). Anchoring the head elsewhere makes even a
// rewrite of the whole log detectable.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash []byte `json:"hash"`
	// Bytes is the data the log holds: the sum of its events' data bytes, kept with
	// the head so that a bound on a log's size holds across restarts. Heads written
	// before it was kept count from their first later append.
	Bytes uint64 `json:"bytes"`
}

// eventRecord is the stored form of an Event: CallID is derived from Data on read,
// never stored beside it, so that it is covered by the hash.
type eventRecord struct {
	PID      string          `json:"pid"`
	Seq      uint64          `json:"seq"`
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	Data     json.RawMessage `json:"data"`
	PrevHash []byte          `json:"prev_hash"`
	Hash     []byte          `json:"hash"`
}

var zeroHash = make([]byte, HashSize)

// encodeEventRecord is marshal(r) written out by hand: the same bytes, without
// reflection and without compacting Data a second time (Append passes the compact
// form jsonobj.Object returned). Whatever the plain form cannot spell exactly as
// encoding/json would (a string that needs escaping, a nil hash, a year outside
// RFC 3339) goes through marshal.
func encodeEventRecord(r eventRecord) ([]byte, error) {
	return appendEventRecord(nil, r)
}

// appendEventRecord is encodeEventRecord appending to dst (the Tx's scratch buffer:
// a batch copies the value it is given).
func appendEventRecord(dst []byte, r eventRecord) ([]byte, error) {
	if !plainJSONString(r.PID) || !plainJSONString(r.Type) || r.PrevHash == nil || r.Hash == nil ||
		r.Time.Year() < 0 || r.Time.Year() > 9999 || r.Time.Location() != time.UTC || len(r.Data) == 0 {
		return marshal(r)
	}
	// The fixed text, the time (at most 35 bytes) and both hashes in base64.
	b := slices.Grow(dst[:0], 120+len(r.PID)+len(r.Type)+len(r.Data)+
		base64.StdEncoding.EncodedLen(len(r.PrevHash))+base64.StdEncoding.EncodedLen(len(r.Hash)))
	b = append(b, `{"pid":"`...)
	b = append(b, r.PID...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"type":"`...)
	b = append(b, r.Type...)
	b = append(b, `","time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b = append(b, r.Data...)
	b = append(b, `,"prev_hash":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.PrevHash)
	b = append(b, `","hash":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.Hash)
	b = append(b, `"}`...)
	return b, nil
}

// plainJSONString reports whether encoding/json (HTML escaping off) writes s as is
// between quotes: valid UTF-8 without quotes, backslashes, control characters or
// U+2028/U+2029.
func plainJSONString(s string) bool {
	if !utf8.ValidString(s) || strings.ContainsAny(s, "\"\\\u2028\u2029") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return true
}

// eventHash is SHA-256 over a canonical, length-prefixed encoding of every field but
// the hash itself. The encoding is part of the format version.
func eventHash(pid string, seq uint64, typ string, t time.Time, data, prev []byte) []byte {
	sum, _ := eventSum(nil, pid, seq, typ, t, data, prev)
	return sum[:]
}

// eventSum is eventHash building the hashed encoding in scratch (returned, grown, for
// the next use), so that appending an event allocates nothing for its hash's input.
func eventSum(scratch []byte, pid string, seq uint64, typ string, t time.Time, data, prev []byte) ([HashSize]byte, []byte) {
	buf := slices.Grow(scratch[:0], 14+4*binary.MaxVarintLen64+16+len(pid)+len(typ)+len(data)+len(prev))
	buf = append(buf, "libos.event.v1"...)
	buf = binary.AppendUvarint(buf, uint64(len(pid)))
	buf = append(buf, pid...)
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = binary.AppendUvarint(buf, uint64(len(typ)))
	buf = append(buf, typ...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(t.UnixNano()))
	buf = binary.AppendUvarint(buf, uint64(len(data)))
	buf = append(buf, data...)
	buf = binary.AppendUvarint(buf, uint64(len(prev)))
	buf = append(buf, prev...)
	return sha256.Sum256(buf), buf
}

func isSettlement(typ string) bool {
	return typ == EventToolResult || typ == EventToolFailed || typ == EventUnknownSettlement
}

// maxEventDepth bounds the nesting of event data the store parses. The store has no
// depth policy of its own (the kernel bounds arguments and results far below this);
// the bound keeps a hostile nesting from exhausting the parser's stack.
const maxEventDepth = 10_000

// checkEventData validates an event's data and returns its compact form and call ID.
// Data from any writer is parsed here, exactly (internal/jsonexact).
func checkEventData(typ string, data json.RawMessage) (json.RawMessage, string, error) {
	if len(data) == 0 || bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		data = json.RawMessage("{}")
	}
	if len(data) > maxValueLen {
		return nil, "", errorf(CodeInvalid, nil, "event data over %d bytes", maxValueLen)
	}
	compact, fields, err := jsonexact.SplitObject(data, maxEventDepth)
	if err != nil {
		return nil, "", errorf(CodeInvalid, err, "event data must be a JSON object")
	}
	call, ok := jsonexact.FieldString(fields, CallIDField)
	_, present := fields[CallIDField]
	if err := checkEventCall(typ, call, ok, present); err != nil {
		return nil, "", err
	}
	return compact, call, nil
}

// checkEventDoc is checkEventData for data that internal/jsonexact already holds as
// exact JSON (a Doc, which only that package can make): the store checks what it
// requires of event data (an object, within the size bound, the call_id rules) and
// does not parse the text again. The zero Doc means {}.
func checkEventDoc(typ string, data jsonexact.Doc) (json.RawMessage, string, error) {
	if data.IsZero() || data.Kind() == jsonexact.Null {
		return checkEventData(typ, nil)
	}
	if data.Len() > maxValueLen {
		return nil, "", errorf(CodeInvalid, nil, "event data over %d bytes", maxValueLen)
	}
	if data.Kind() != jsonexact.Object {
		return nil, "", errorf(CodeInvalid, nil, "event data must be a JSON object, got %s", data.Kind())
	}
	call, ok := data.String(CallIDField)
	if err := checkEventCall(typ, call, ok, data.Has(CallIDField)); err != nil {
		return nil, "", err
	}
	return data.Bytes(), call, nil
}

// checkEventCall applies the call_id rules: tool_called and its settlements carry a
// string call_id that is a valid ID; any other event's call_id, when a non-empty
// string, is a valid ID too.
func checkEventCall(typ, call string, isString, present bool) error {
	if typ == EventToolCalled || isSettlement(typ) {
		if !isString {
			return errorf(CodeInvalid, nil, "%s event needs a string %q in its data", typ, CallIDField)
		}
		return checkID("call id", call)
	}
	if present && isString && call != "" {
		return checkID("call id", call)
	}
	return nil
}

func decodeEvent(v []byte) (Event, error) {
	var r eventRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Event{}, err
	}
	e := Event{PID: r.PID, Seq: r.Seq, Type: r.Type, Time: r.Time, Data: r.Data, PrevHash: r.PrevHash, Hash: r.Hash}
	if _, fields, err := jsonexact.SplitObject(r.Data, maxEventDepth); err == nil {
		e.CallID, _ = jsonexact.FieldString(fields, CallIDField)
	}
	return e, nil
}

func encodeHead(h Head) []byte {
	return appendHead(nil, h)
}

// appendHead is encodeHead appending to dst.
func appendHead(dst []byte, h Head) []byte {
	return binary.BigEndian.AppendUint64(append(binary.BigEndian.AppendUint64(dst, h.Seq), h.Hash...), h.Bytes)
}

// decodeHead reads a head record: sequence, hash and data bytes, or the older form
// without the byte count.
func decodeHead(v []byte) (Head, bool) {
	switch len(v) {
	case 8 + HashSize:
		return Head{Seq: binary.BigEndian.Uint64(v), Hash: append([]byte(nil), v[8:]...)}, true
	case 8 + HashSize + 8:
		return Head{Seq: binary.BigEndian.Uint64(v), Hash: append([]byte(nil), v[8:8+HashSize]...), Bytes: binary.BigEndian.Uint64(v[8+HashSize:])}, true
	}
	return Head{}, false
}
