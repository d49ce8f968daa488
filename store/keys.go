package store

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/agentlibos/libos/liberr"
)

// formatVersion is the version of the key layout documented in doc.go. Bump it (and
// add a named, tested migration) whenever a key or an encoding changes meaning.
const formatVersion = 1

// Key tables. Every key starts with a table name and a 0x00 separator; IDs never
// contain 0x00, so no key of one table or process is a prefix of another's.
const (
	tMeta   = "meta"
	tProc   = "proc"
	tHead   = "head"
	tEvent  = "evt"
	tOpen   = "open"
	tResult = "res"
	tCand   = "cand"
	tBind   = "bind"
	tAppr   = "appr"
	tCkpt   = "ckpt"
	tBudget = "budget"
	tKV     = "kv"
	// tKVLabel holds the data-flow labels of a kv value, beside it: absent means the
	// value carries none.
	tKVLabel = "kvlab"
	tJournal = "jrnl"
)

const sep = 0x00

func key(table string, parts ...string) []byte {
	n := len(table)
	for _, p := range parts {
		n += 1 + len(p)
	}
	return appendKey(make([]byte, 0, n), table, parts...)
}

// appendKey appends key(table, parts...) to dst.
func appendKey(dst []byte, table string, parts ...string) []byte {
	dst = append(dst, table...)
	for _, p := range parts {
		dst = append(dst, sep)
		dst = append(dst, p...)
	}
	return dst
}

// prefix returns the key prefix of all records of table for pid (table\0pid\0).
func prefix(table, pid string) []byte { return append(key(table, pid), sep) }

func formatKey() []byte               { return key(tMeta, "format") }
func procKey(pid string) []byte       { return key(tProc, pid) }
func headKey(pid string) []byte       { return key(tHead, pid) }
func openKey(pid, call string) []byte { return key(tOpen, pid, call) }
func resultKey(pid, call string) []byte {
	return key(tResult, pid, call)
}
func candKey(pid, id string) []byte     { return key(tCand, pid, id) }
func bindKey(pid, name string) []byte   { return key(tBind, pid, name) }
func apprKey(pid, id string) []byte     { return key(tAppr, pid, id) }
func ckptKey(pid, id string) []byte     { return key(tCkpt, pid, id) }
func budgetKey(pid, name string) []byte { return key(tBudget, pid, name) }
func kvKey(pid, k string) []byte        { return key(tKV, pid, k) }
func kvLabelKey(pid, k string) []byte   { return key(tKVLabel, pid, k) }

func eventKey(pid string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(prefix(tEvent, pid), seq)
}

// upperBound returns the smallest key greater than every key that has prefix p.
func upperBound(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // no upper bound
}

// Limits that protect the layout, not policy: engine and syscalls enforce their own,
// smaller limits.
const (
	maxIDLen    = 256
	maxKVKeyLen = 4096
	maxValueLen = 16 << 20
	// MaxPage is the largest page any list method returns.
	MaxPage = 10000
)

// checkID validates a PID or record ID: 1..256 bytes of UTF-8 without control
// characters (so it can never contain the 0x00 separator). The refusal quotes the ID
// clipped: an ID of any size comes back as a short message.
func checkID(what, id string) error {
	if id == "" || len(id) > maxIDLen || !utf8.ValidString(id) {
		return errorf(CodeInvalid, nil, "invalid %s %q", what, liberr.Clip(id, maxQuotedID))
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return errorf(CodeInvalid, nil, "invalid %s %q", what, liberr.Clip(id, maxQuotedID))
		}
	}
	return nil
}

// maxQuotedID bounds the bytes of a refused ID that its error quotes.
const maxQuotedID = 80

func checkKVKey(k string) error {
	if k == "" || len(k) > maxKVKeyLen || !utf8.ValidString(k) {
		return errorf(CodeInvalid, nil, "invalid kv key (1..%d bytes of UTF-8)", maxKVKeyLen)
	}
	return nil
}

func clampLimit(limit int) int {
	if limit <= 0 || limit > MaxPage {
		return MaxPage
	}
	return limit
}
