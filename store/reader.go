package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// reader holds the read methods shared by Store (reading committed state) and Tx
// (reading committed state plus the transaction's own writes).
type reader struct {
	r     pebble.Reader
	enter func() (release func(), err error) // nil inside a Tx
}

func (r *reader) begin() (func(), error) {
	if r.enter == nil {
		return func() {}, nil
	}
	return r.enter()
}

// view returns a reader whose reads all see the store as of one moment, and the
// function that releases it: a Pebble snapshot when r reads the database, r itself
// inside a Tx (whose reads no other write can interleave). A method whose check spans
// several reads (an index and what it points to, a head and the log it ends) reads
// through it, so that a write committed between two of its reads cannot look like
// corruption.
func (r *reader) view() (*reader, func()) {
	if db, ok := r.r.(*pebble.DB); ok {
		snap := db.NewSnapshot()
		return &reader{r: snap}, func() { snap.Close() }
	}
	return r, func() {}
}

// get returns a copy of the value at k, or a not_found error.
func (r *reader) get(k []byte, what string) ([]byte, error) {
	v, closer, err := r.r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errorf(CodeNotFound, nil, "%s not found", what)
	}
	if err != nil {
		return nil, readErr(err, "read %s", what)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (r *reader) getJSON(k []byte, what string, out any) error {
	v, err := r.get(k, what)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(v, out); err != nil {
		return errorf(CodeCorrupt, err, "decode %s", what)
	}
	return nil
}

// scan calls fn for each key in [start, upperBound(pfx)) in order, at most limit
// times (limit <= 0: no limit). fn returns false to stop.
func (r *reader) scan(pfx, start []byte, limit int, fn func(k, v []byte) (bool, error)) error {
	it, err := r.r.NewIter(&pebble.IterOptions{LowerBound: pfx, UpperBound: upperBound(pfx)})
	if err != nil {
		return readErr(err, "read")
	}
	n := 0
	var ferr error
	for ok := it.SeekGE(start); ok; ok = it.Next() {
		if limit > 0 && n >= limit {
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			ferr = readErr(err, "read")
			break
		}
		n++
		more, err := fn(it.Key(), v)
		if err != nil {
			ferr = err
			break
		}
		if !more {
			break
		}
	}
	if err := it.Close(); err != nil && ferr == nil {
		ferr = readErr(err, "read")
	}
	return ferr
}

func listJSON[T any](r *reader, pfx []byte, what string) ([]T, error) {
	var out []T
	err := r.scan(pfx, pfx, 0, func(k, v []byte) (bool, error) {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return false, errorf(CodeCorrupt, err, "decode %s %q", what, k)
		}
		out = append(out, x)
		return true, nil
	})
	return out, err
}

// Process returns the process record of pid.
func (r *reader) Process(pid string) (Process, error) {
	var p Process
	if err := checkID("pid", pid); err != nil {
		return p, err
	}
	release, err := r.begin()
	if err != nil {
		return p, err
	}
	defer release()
	err = r.getJSON(procKey(pid), "process "+pid, &p)
	return p, err
}

// Processes returns every process record, ordered by PID.
func (r *reader) Processes() ([]Process, error) {
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	return listJSON[Process](r, append([]byte(tProc), sep), "process")
}

// Head returns the sequence number and hash of the last event of pid (zero and
// zero bytes when the log is empty).
func (r *reader) Head(pid string) (Head, error) {
	if err := checkID("pid", pid); err != nil {
		return Head{}, err
	}
	release, err := r.begin()
	if err != nil {
		return Head{}, err
	}
	defer release()
	return r.head(pid)
}

func (r *reader) head(pid string) (Head, error) {
	v, err := r.get(headKey(pid), "head")
	if errors.Is(err, ErrNotFound) {
		return Head{Seq: 0, Hash: append([]byte(nil), zeroHash...)}, nil
	}
	if err != nil {
		return Head{}, err
	}
	h, ok := decodeHead(v)
	if !ok {
		return Head{}, errorf(CodeCorrupt, nil, "head of %s is malformed", pid)
	}
	return h, nil
}

// Events returns the events of pid with Seq > after, in order, at most limit of them
// (limit <= 0 or > MaxPage means MaxPage). To page, pass the last Seq returned as
// the next after.
func (r *reader) Events(pid string, after uint64, limit int) ([]Event, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	if after == ^uint64(0) {
		return nil, nil
	}
	var out []Event
	err = r.scan(prefix(tEvent, pid), eventKey(pid, after+1), clampLimit(limit), func(k, v []byte) (bool, error) {
		e, err := decodeEvent(v)
		if err != nil {
			return false, errorf(CodeCorrupt, err, "decode event %d of %s", seqOf(k), pid)
		}
		out = append(out, e)
		return true, nil
	})
	return out, err
}

// Event returns event seq of pid.
func (r *reader) Event(pid string, seq uint64) (Event, error) {
	if err := checkID("pid", pid); err != nil {
		return Event{}, err
	}
	release, err := r.begin()
	if err != nil {
		return Event{}, err
	}
	defer release()
	v, err := r.get(eventKey(pid, seq), fmt.Sprintf("event %d of %s", seq, pid))
	if err != nil {
		return Event{}, err
	}
	e, derr := decodeEvent(v)
	if derr != nil {
		return Event{}, errorf(CodeCorrupt, derr, "decode event %d of %s", seq, pid)
	}
	return e, nil
}

func seqOf(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

// Verify walks the whole event log of pid and checks that sequence numbers are
// dense from 1, that each event's prev_hash is the previous event's hash, that each
// hash matches the event's content, and that the chain ends at the recorded head.
// The first violation is returned as a corrupt error wrapping a *VerifyError
// that carries its Seq. The head and the events are read as of one moment (view), so
// a log that grows meanwhile verifies.
func (r *reader) Verify(pid string) error {
	if err := checkID("pid", pid); err != nil {
		return err
	}
	release, err := r.begin()
	if err != nil {
		return err
	}
	defer release()
	r, done := r.view()
	defer done()
	head, err := r.head(pid)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return VerifyFailed(pid, 0, "head record is malformed")
		}
		return err
	}
	want := uint64(1)
	prev := zeroHash
	var verr *VerifyError
	err = r.scan(prefix(tEvent, pid), prefix(tEvent, pid), 0, func(k, v []byte) (bool, error) {
		ks := seqOf(k)
		if len(k) != len(prefix(tEvent, pid))+8 {
			verr = &VerifyError{PID: pid, Seq: want, Reason: "malformed event key"}
			return false, nil
		}
		if ks != want {
			verr = &VerifyError{PID: pid, Seq: want, Reason: fmt.Sprintf("event missing (next stored is %d)", ks)}
			if ks < want {
				verr.Reason = "event out of order"
			}
			return false, nil
		}
		var e eventRecord
		if err := json.Unmarshal(v, &e); err != nil {
			verr = &VerifyError{PID: pid, Seq: want, Reason: "event does not decode: " + err.Error()}
			return false, nil
		}
		canon, _ := marshal(e)
		switch {
		case !bytes.Equal(canon, v):
			verr = &VerifyError{PID: pid, Seq: want, Reason: "stored bytes are not the canonical encoding"}
		case e.PID != pid:
			verr = &VerifyError{PID: pid, Seq: want, Reason: "event belongs to another process"}
		case e.Seq != want:
			verr = &VerifyError{PID: pid, Seq: want, Reason: fmt.Sprintf("event carries seq %d", e.Seq)}
		case !bytes.Equal(e.PrevHash, prev):
			verr = &VerifyError{PID: pid, Seq: want, Reason: "prev_hash does not match the previous event"}
		case !bytes.Equal(e.Hash, eventHash(e.PID, e.Seq, e.Type, e.Time, e.Data, e.PrevHash)):
			verr = &VerifyError{PID: pid, Seq: want, Reason: "hash does not match the content"}
		}
		if verr != nil {
			return false, nil
		}
		prev = e.Hash
		want++
		return true, nil
	})
	if err != nil {
		return err
	}
	if verr != nil {
		return VerifyFailed(verr.PID, verr.Seq, verr.Reason)
	}
	last := want - 1
	switch {
	case head.Seq > last:
		return VerifyFailed(pid, last+1, fmt.Sprintf("event missing (head is at %d)", head.Seq))
	case head.Seq < last:
		return VerifyFailed(pid, head.Seq+1, fmt.Sprintf("event beyond the head (head is at %d)", head.Seq))
	case !bytes.Equal(head.Hash, prev):
		return VerifyFailed(pid, last, "hash differs from the recorded head")
	}
	return nil
}

// Unsettled returns the tool_called events of pid that have no settlement
// (tool_result, tool_failed or unknown_settlement with the same call_id), in
// sequence order. A rehydrating engine reports each as unknown settlement.
func (r *reader) Unsettled(pid string) ([]Event, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	// The index and the events it points to, as of one moment (view).
	r, done := r.view()
	defer done()
	var seqs []uint64
	err = r.scan(prefix(tOpen, pid), prefix(tOpen, pid), 0, func(k, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, errorf(CodeCorrupt, nil, "open call index of %s is malformed", pid)
		}
		seqs = append(seqs, binary.BigEndian.Uint64(v))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	out := make([]Event, 0, len(seqs))
	for _, seq := range seqs {
		v, err := r.get(eventKey(pid, seq), fmt.Sprintf("event %d of %s", seq, pid))
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, errorf(CodeCorrupt, nil, "open call refers to missing event %d of %s", seq, pid)
			}
			return nil, err
		}
		e, derr := decodeEvent(v)
		if derr != nil {
			return nil, errorf(CodeCorrupt, derr, "decode event %d of %s", seq, pid)
		}
		out = append(out, e)
	}
	return out, nil
}

// Candidate returns candidate id if it is owned by pid. A candidate of another
// process is reported exactly like an unknown ID: not_found.
func (r *reader) Candidate(pid, id string) (Candidate, error) {
	var c Candidate
	if err := checkID("pid", pid); err != nil {
		return c, err
	}
	if err := checkID("candidate id", id); err != nil {
		return c, errorf(CodeNotFound, nil, "candidate %q not found", id)
	}
	release, err := r.begin()
	if err != nil {
		return c, err
	}
	defer release()
	err = r.getJSON(candKey(pid, id), fmt.Sprintf("candidate %q", id), &c)
	return c, err
}

// Candidates returns the candidates owned by pid, ordered by ID.
func (r *reader) Candidates(pid string) ([]Candidate, error) {
	return listOf[Candidate](r, pid, tCand, "candidate")
}

// Binding returns the binding of tool name in pid.
func (r *reader) Binding(pid, name string) (Binding, error) {
	return getOf[Binding](r, pid, "tool name", name, bindKey, "binding")
}

// Bindings returns the JIT tool bindings of pid, ordered by name.
func (r *reader) Bindings(pid string) ([]Binding, error) {
	return listOf[Binding](r, pid, tBind, "binding")
}

// ToolResult returns the result persisted for callID in pid.
func (r *reader) ToolResult(pid, callID string) (ToolResult, error) {
	return getOf[ToolResult](r, pid, "call id", callID, resultKey, "tool result")
}

// Approval returns approval id of pid.
func (r *reader) Approval(pid, id string) (Approval, error) {
	return getOf[Approval](r, pid, "approval id", id, apprKey, "approval")
}

// Approvals returns the approvals of pid, ordered by ID.
func (r *reader) Approvals(pid string) ([]Approval, error) {
	return listOf[Approval](r, pid, tAppr, "approval")
}

// Checkpoint returns checkpoint id of pid.
func (r *reader) Checkpoint(pid, id string) (Checkpoint, error) {
	return getOf[Checkpoint](r, pid, "checkpoint id", id, ckptKey, "checkpoint")
}

// Checkpoints returns the checkpoints of pid, ordered by ID.
func (r *reader) Checkpoints(pid string) ([]Checkpoint, error) {
	return listOf[Checkpoint](r, pid, tCkpt, "checkpoint")
}

// Budget returns counter name of pid; a counter never charged reads as Used 0.
func (r *reader) Budget(pid, name string) (Budget, error) {
	b, err := getOf[Budget](r, pid, "budget name", name, budgetKey, "budget")
	if errors.Is(err, ErrNotFound) {
		return Budget{PID: pid, Name: name}, nil
	}
	return b, err
}

// Budgets returns the budget counters of pid, ordered by name.
func (r *reader) Budgets(pid string) ([]Budget, error) {
	return listOf[Budget](r, pid, tBudget, "budget")
}

func getOf[T any](r *reader, pid, idWhat, id string, keyFn func(string, string) []byte, what string) (T, error) {
	var x T
	if err := checkID("pid", pid); err != nil {
		return x, err
	}
	if err := checkID(idWhat, id); err != nil {
		return x, err
	}
	release, err := r.begin()
	if err != nil {
		return x, err
	}
	defer release()
	err = r.getJSON(keyFn(pid, id), fmt.Sprintf("%s %q", what, id), &x)
	return x, err
}

func listOf[T any](r *reader, pid, table, what string) ([]T, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	return listJSON[T](r, prefix(table, pid), what)
}

// KVGet returns the value of key in pid's key–value space.
func (r *reader) KVGet(pid, key string) ([]byte, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	if err := checkKVKey(key); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	return r.get(kvKey(pid, key), fmt.Sprintf("kv key %q", key))
}

// KVLabels returns the data-flow labels recorded with key's value in pid's key–value
// space (KVSetLabels); nil when it has none or does not exist.
func (r *reader) KVLabels(pid, key string) ([]string, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, err
	}
	if err := checkKVKey(key); err != nil {
		return nil, err
	}
	release, err := r.begin()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []string
	err = r.getJSON(kvLabelKey(pid, key), fmt.Sprintf("kv labels of %q", key), &out)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return out, err
}

// KVList returns the entries of pid whose keys start with keyPrefix and sort after
// cursor (byte order), at most limit (limit <= 0 or > MaxPage means MaxPage). next is
// the cursor of the following page, "" when there is none.
func (r *reader) KVList(pid, keyPrefix, cursor string, limit int) (entries []KVEntry, next string, err error) {
	if err := checkID("pid", pid); err != nil {
		return nil, "", err
	}
	if len(keyPrefix) > maxKVKeyLen || len(cursor) > maxKVKeyLen {
		return nil, "", errorf(CodeInvalid, nil, "kv prefix or cursor too long")
	}
	if cursor != "" && !strings.HasPrefix(cursor, keyPrefix) {
		return nil, "", errorf(CodeInvalid, nil, "kv cursor %q does not match prefix %q", cursor, keyPrefix)
	}
	release, err := r.begin()
	if err != nil {
		return nil, "", err
	}
	defer release()
	base := prefix(tKV, pid)
	pfx := append(append([]byte(nil), base...), keyPrefix...)
	start := pfx
	if cursor != "" {
		start = append(append(append([]byte(nil), base...), cursor...), 0) // first key after cursor
	}
	limit = clampLimit(limit)
	err = r.scan(pfx, start, limit+1, func(k, v []byte) (bool, error) {
		entries = append(entries, KVEntry{Key: string(k[len(base):]), Value: append([]byte(nil), v...)})
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	if len(entries) > limit {
		entries = entries[:limit]
		next = entries[limit-1].Key
	}
	return entries, next, nil
}
