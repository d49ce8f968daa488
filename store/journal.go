package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// JournalEntry is one syscall of a tool call as the tool's code saw it: the route, the
// arguments it sent and the result (or typed error) it received. The syscall router
// writes it in the same batch as the call's audit event, which carries the entry's
// digest, so the event log's hash chain covers the journal as well. What the fields
// mean (bounds, labels) is the router's business; the store keeps them exactly.
type JournalEntry struct {
	PID    string `json:"pid"`
	CallID string `json:"call_id"`
	// Index is the syscall's position in its call: 0, 1, 2, … dense.
	Index int    `json:"index"`
	Route string `json:"route"`
	// Args are the arguments as the code sent them (compact JSON), absent when the
	// entry is truncated.
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsBytes  int             `json:"args_bytes"`
	ArgsSHA256 string          `json:"args_sha256"`
	// Result is what the call resolved with, absent when it failed or was truncated.
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBytes  int             `json:"result_bytes,omitempty"`
	ResultSHA256 string          `json:"result_sha256,omitempty"`
	// Error is the typed error the call rejected with.
	Error *JournalError `json:"error,omitempty"`
	// Truncated: the entry was over its bound and keeps only sizes and digests.
	Truncated bool `json:"truncated,omitempty"`
	// Labels are the data-flow labels of the result, as the router recorded them.
	Labels []string `json:"labels,omitempty"`

	// Digest is the SHA-256 (hex) of the stored record: the value the audit event
	// carries. Set by PutJournal and by the readers, never stored.
	Digest string `json:"-"`
}

// JournalError is the typed error a syscall rejected with: its code, the layer that
// emitted it and its message without the layer's name. The code saw the text
// "layer: message" (the message alone when Layer is empty). An entry written before
// Layer was recorded has no layer and holds in Message the whole text the code saw;
// read as it is, it renders those same bytes, so nothing is recovered from the text.
type JournalError struct {
	Code    string `json:"code"`
	Layer   string `json:"layer,omitempty"`
	Message string `json:"message"`
}

// maxJournalIndex bounds a call's journal: far above any per-call bound the router
// applies, it only keeps the key's index field meaningful.
const maxJournalIndex = 1<<31 - 1

func journalKey(pid, call string, index int) []byte {
	return binary.BigEndian.AppendUint32(append(key(tJournal, pid, call), sep), uint32(index))
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PutJournal writes entry e of call e.CallID and returns its digest (also set in
// e.Digest by readers). An entry is written once: a second entry at the same index is
// a conflict.
func (tx *Tx) PutJournal(e JournalEntry) (string, error) {
	if err := tx.check(); err != nil {
		return "", err
	}
	if err := checkID("pid", e.PID); err != nil {
		return "", err
	}
	if err := checkID("call id", e.CallID); err != nil {
		return "", err
	}
	if e.Index < 0 || e.Index > maxJournalIndex {
		return "", errorf(CodeInvalid, nil, "journal index %d out of range", e.Index)
	}
	if err := checkRaw("journal entry", e.Args, e.Result); err != nil {
		return "", err
	}
	k := journalKey(e.PID, e.CallID, e.Index)
	// The entry's place among the process's journal keys: the call ID, then the index.
	suffix := string(k[len(tJournal)+1+len(e.PID)+1:])
	if !tx.callAbove(tJournal, e.PID, suffix) {
		ok, err := tx.exists(k)
		if err != nil {
			return "", err
		}
		if ok {
			return "", errorf(CodeConflict, nil, "call %q of %s already has journal entry %d", e.CallID, e.PID, e.Index)
		}
	}
	tx.raiseCall(tJournal, e.PID, suffix)
	b, err := marshal(e)
	if err != nil {
		return "", errorf(CodeInvalid, err, "encode journal entry")
	}
	if err := tx.set(k, b); err != nil {
		return "", err
	}
	return digest(b), nil
}

// Journal returns the journal of call callID of pid, in index order (empty when the
// call made no syscall or none was journaled).
func (r *reader) Journal(pid, callID string) ([]JournalEntry, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	if err := checkID("call id", callID); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	pfx := append(key(tJournal, pid, callID), sep)
	var out []JournalEntry
	err = r.scan(pfx, pfx, 0, func(k, v []byte) (bool, error) {
		var e JournalEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, errorf(CodeCorrupt, err, "decode journal entry %q", k)
		}
		if e.PID != pid || e.CallID != callID || len(k) != len(pfx)+4 || int(binary.BigEndian.Uint32(k[len(pfx):])) != e.Index {
			return false, errorf(CodeCorrupt, nil, "journal entry %q does not match its key", k)
		}
		e.Digest = digest(v)
		out = append(out, e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for i, e := range out {
		if e.Index != i {
			return nil, errorf(CodeCorrupt, nil, "journal of call %q of %s: entry %d is missing", callID, pid, i)
		}
	}
	return out, nil
}

// String names the entry for messages.
func (e JournalEntry) String() string { return fmt.Sprintf("%s#%d %s", e.CallID, e.Index, e.Route) }
