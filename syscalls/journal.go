package syscalls

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Default journal bounds (JournalLimits).
const (
	// DefaultJournalEntryBytes bounds the arguments plus result kept whole in one
	// journal entry: the default result limit of a tool call.
	DefaultJournalEntryBytes = 64 << 10
	// DefaultJournalCallBytes bounds what one tool call's journal keeps whole.
	DefaultJournalCallBytes = 1 << 20
)

// JournalLimits bound the syscall journal of one tool call. An entry whose arguments
// and result exceed MaxEntryBytes, or that would take the call's journal past
// MaxCallBytes, keeps only sizes and digests and is marked truncated: the call then
// cannot be exported as a tape. Zero means the default; the image sets them.
type JournalLimits struct {
	MaxEntryBytes int `json:"max_entry_bytes,omitempty"`
	MaxCallBytes  int `json:"max_call_bytes,omitempty"`
}

func (l JournalLimits) withDefaults() JournalLimits {
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultJournalEntryBytes
	}
	if l.MaxCallBytes <= 0 {
		l.MaxCallBytes = DefaultJournalCallBytes
	}
	return l
}

// journal numbers and bounds the entries of one tool call. Syscalls of one call come
// one at a time from its guest, but tools.call may run while another tool of the
// process journals, so the counters are locked anyway.
type journal struct {
	mu     sync.Mutex
	next   int
	used   int
	limits JournalLimits
}

// entry builds the journal entry of one finished syscall. The arguments are kept as
// the code sent them (compacted): a secret reference stays a reference, because the
// host resolves it after this point and never hands it back.
func (j *journal) entry(pid, callID, route string, args json.RawMessage, exact bool, result json.RawMessage, se *Error, labels []string) store.JournalEntry {
	e := store.JournalEntry{PID: pid, CallID: callID, Route: route, Labels: labels}
	e.ArgsBytes, e.ArgsSHA256 = len(args), sha256hex(args)
	var cargs bytes.Buffer
	argsOK := exact && json.Compact(&cargs, args) == nil
	size := cargs.Len()
	if se != nil {
		// The layer is kept as a field, so that a replay rebuilds the error the code
		// saw without reading its text.
		e.Error = &store.JournalError{Code: string(se.Code), Layer: se.Layer, Message: se.Message}
		size += len(se.Layer) + len(e.Error.Message)
	} else {
		e.ResultBytes, e.ResultSHA256 = len(result), sha256hex(result)
		size += len(result)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	e.Index = j.next
	j.next++
	if !argsOK || size > j.limits.MaxEntryBytes || j.used+size > j.limits.MaxCallBytes {
		e.Truncated = true
		if e.Error != nil {
			e.Error.Message = liberr.Clip(e.Error.Message, 256)
		}
		return e
	}
	j.used += size
	e.Args = cargs.Bytes()
	if se == nil {
		e.Result = append(json.RawMessage(nil), result...)
	}
	return e
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
