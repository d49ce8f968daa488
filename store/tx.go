package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"

	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// Tx is one atomic write: everything written through it is committed by Update (or
// UpdateDeferred) as a single batch, or not at all. Reads through a Tx see committed state plus
// the Tx's own writes. A Tx is valid only inside the fn passed to Update.
type Tx struct {
	reader
	s      *Store
	b      *pebble.Batch
	now    time.Time
	active bool
	// heads holds the heads this Tx has written, for the Store's cache once the
	// batch is applied: a short list (a Tx nearly always writes one process), so that
	// a call's batches allocate no map.
	heads []stagedHead
	// heads0 backs heads for the usual single process.
	heads0 [1]stagedHead
	// kbuf and vbuf are scratch space for the keys and values the Tx stages: a batch
	// copies what it is given, so one buffer serves every write. They are the
	// Store's (scratch), lent to the Tx under wmu and handed back by runTx.
	kbuf, vbuf []byte
	// quota is the Quota of the context the Tx runs under, or nil.
	quota *Quota
}

// cachedHead is a head held by value, so that no Event handed out aliases it.
type cachedHead struct {
	seq   uint64
	hash  [HashSize]byte
	bytes uint64
}

// stagedHead is a head a Tx has written for pid.
type stagedHead struct {
	pid string
	cachedHead
}

// staged returns the head this Tx has written for pid, if any.
func (tx *Tx) staged(pid string) (cachedHead, bool) {
	for i := range tx.heads {
		if tx.heads[i].pid == pid {
			return tx.heads[i].cachedHead, true
		}
	}
	return cachedHead{}, false
}

// stage records the head this Tx has just written for pid.
func (tx *Tx) stage(pid string, h cachedHead) {
	for i := range tx.heads {
		if tx.heads[i].pid == pid {
			tx.heads[i].cachedHead = h
			return
		}
	}
	if tx.heads == nil {
		tx.heads = tx.heads0[:0]
	}
	tx.heads = append(tx.heads, stagedHead{pid: pid, cachedHead: h})
}

// lastHead is pid's head as this Tx sees it: its own last append, the Store's cache
// of successful batches, or the head record.
func (tx *Tx) lastHead(pid string) (Head, error) {
	h, ok := tx.staged(pid)
	if !ok {
		h, ok = tx.s.heads[pid]
	}
	if ok {
		return Head{Seq: h.seq, Hash: append([]byte(nil), h.hash[:]...), Bytes: h.bytes}, nil
	}
	return tx.head(pid)
}

// Now is the timestamp stamped on every record and event written by this Tx.
func (tx *Tx) Now() time.Time { return tx.now }

func (tx *Tx) check() error {
	if !tx.active {
		return errorf(CodeClosed, nil, "transaction used outside its Update")
	}
	return nil
}

// checkIDs is the preamble of a write: the transaction is still in its Update, and
// each identifier, given as a pair of what it names and its value, is well-formed.
// The first failure is returned, in that order.
func (tx *Tx) checkIDs(pairs ...string) error {
	if err := tx.check(); err != nil {
		return err
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// absent fails with a conflict, worded by format and args, when k holds a record: a
// record that is only ever created, never replaced.
func (tx *Tx) absent(k []byte, format string, args ...any) error {
	ok, err := tx.exists(k)
	if err != nil {
		return err
	}
	if ok {
		return errorf(CodeConflict, nil, format, args...)
	}
	return nil
}

func (tx *Tx) enterRead() (func(), error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// key builds key(table, parts...) in the Tx's key buffer; it is valid until the next
// call, which is enough for a batch's Set and Delete (they copy it).
func (tx *Tx) key(table string, parts ...string) []byte {
	tx.kbuf = appendKey(tx.kbuf[:0], table, parts...)
	return tx.kbuf
}

func (tx *Tx) set(k, v []byte) error {
	if len(v) > maxValueLen {
		return errorf(CodeInvalid, nil, "record over %d bytes", maxValueLen)
	}
	if err := tx.b.Set(k, v, nil); err != nil {
		return errorf(CodeIO, err, "stage write")
	}
	return nil
}

func (tx *Tx) exists(k []byte) (bool, error) {
	_, err := tx.get(k, "record")
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (tx *Tx) putJSON(k []byte, v any) error {
	b, err := marshal(v)
	if err != nil {
		return errorf(CodeInvalid, err, "encode record")
	}
	return tx.set(k, b)
}

// marshal encodes without HTML escaping so that stored JSON keeps the exact bytes
// that were hashed.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkRaw rejects raw JSON fields that are not valid JSON (nil is allowed).
func checkRaw(what string, raws ...json.RawMessage) error {
	for _, r := range raws {
		if len(r) > 0 && !json.Valid(r) {
			return errorf(CodeInvalid, nil, "%s holds malformed JSON", what)
		}
	}
	return nil
}

// Append adds an event to the end of pid's log and returns it with its sequence
// number and hash. data must be a JSON object (nil means {}). tool_called and its
// settlements (tool_result, tool_failed, unknown_settlement) must carry a string
// call_id in data: tool_called opens the call (conflict if it is already open), a
// settlement closes it. The event is durable only when Update returns nil (after
// UpdateDeferred: when a later synced write returns nil).
func (tx *Tx) Append(pid, typ string, data json.RawMessage) (Event, error) {
	if err := tx.checkAppend(pid, typ); err != nil {
		return Event{}, err
	}
	compact, call, err := checkEventData(typ, data)
	if err != nil {
		return Event{}, err
	}
	return tx.append(pid, typ, compact, call)
}

// AppendDoc is Append for event data the caller holds as a jsonexact.Doc: exact JSON
// that package decoded or encoded, so the store checks the event's rules (an object,
// its size, the call_id) without parsing the text again. The kernel writes the events
// of a call this way, from values it has already decoded or built.
func (tx *Tx) AppendDoc(pid, typ string, data jsonexact.Doc) (Event, error) {
	if err := tx.checkAppend(pid, typ); err != nil {
		return Event{}, err
	}
	compact, call, err := checkEventDoc(typ, data)
	if err != nil {
		return Event{}, err
	}
	return tx.append(pid, typ, compact, call)
}

// checkAppend is what Append and AppendDoc check before the event's data: the batch is
// still open, and the pid and event type are well-formed identifiers.
func (tx *Tx) checkAppend(pid, typ string) error {
	if err := tx.checkIDs("pid", pid); err != nil {
		return err
	}
	return checkID("event type", typ)
}

// append adds an event whose compact data and call ID have been checked.
func (tx *Tx) append(pid, typ string, compact json.RawMessage, call string) (Event, error) {
	head, err := tx.lastHead(pid)
	if err != nil {
		return Event{}, err
	}
	if head.Seq == math.MaxUint64 {
		return Event{}, errorf(CodeLimitExceeded, nil, "event log of %s is full", pid)
	}
	seq := head.Seq + 1
	if err := tx.quota.charge(pid, typ, seq, head.Bytes, len(compact)); err != nil {
		return Event{}, err
	}
	switch {
	case typ == EventToolCalled:
		if !tx.callAbove(tOpen, pid, call) {
			open, err := tx.exists(openKey(pid, call))
			if err != nil {
				return Event{}, err
			}
			if open {
				return Event{}, errorf(CodeConflict, nil, "call %q of %s is already open", call, pid)
			}
		}
		tx.raiseCall(tOpen, pid, call)
		tx.vbuf = binary.BigEndian.AppendUint64(tx.vbuf[:0], seq)
		if err := tx.set(tx.key(tOpen, pid, call), tx.vbuf); err != nil {
			return Event{}, err
		}
	case isSettlement(typ):
		if err := tx.b.Delete(tx.key(tOpen, pid, call), nil); err != nil {
			return Event{}, errorf(CodeIO, err, "stage write")
		}
	}
	var sum [HashSize]byte
	sum, tx.vbuf = eventSum(tx.vbuf, pid, seq, typ, tx.now, compact, head.Hash)
	e := Event{
		PID: pid, Seq: seq, Type: typ, CallID: call, Time: tx.now, Data: compact,
		PrevHash: head.Hash,
		Hash:     append([]byte(nil), sum[:]...),
	}
	v, err := appendEventRecord(tx.vbuf, eventRecord{PID: e.PID, Seq: e.Seq, Type: e.Type, Time: e.Time, Data: e.Data, PrevHash: e.PrevHash, Hash: e.Hash})
	if err != nil {
		return Event{}, errorf(CodeInvalid, err, "encode event")
	}
	tx.vbuf = v[:0]
	tx.kbuf = binary.BigEndian.AppendUint64(append(appendKey(tx.kbuf[:0], tEvent, pid), sep), seq)
	if err := tx.set(tx.kbuf, v); err != nil {
		return Event{}, err
	}
	logBytes := head.Bytes + uint64(len(compact))
	tx.vbuf = appendHead(tx.vbuf[:0], Head{Seq: seq, Hash: sum[:], Bytes: logBytes})
	if err := tx.set(tx.key(tHead, pid), tx.vbuf); err != nil {
		return Event{}, err
	}
	ch := cachedHead{seq: seq, bytes: logBytes}
	copy(ch.hash[:], e.Hash)
	tx.stage(pid, ch)
	return e, nil
}

// PutProcess creates or replaces the record of p.PID. Created is kept from the
// stored record (or set now for a new one); Updated is set now.
func (tx *Tx) PutProcess(p Process) error {
	if err := tx.checkIDs("pid", p.PID); err != nil {
		return err
	}
	if err := checkRaw("process", p.Image, p.Limits); err != nil {
		return err
	}
	old, err := tx.Process(p.PID)
	switch {
	case err == nil:
		p.Created = old.Created
	case errors.Is(err, ErrNotFound):
		p.Created = tx.now
	default:
		return err
	}
	p.Updated = tx.now
	return tx.putJSON(procKey(p.PID), p)
}

// CreateCandidate stores a new candidate owned by c.PID. An existing ID is a
// conflict. Created and Updated are set now.
func (tx *Tx) CreateCandidate(c Candidate) error {
	if err := tx.check(); err != nil {
		return err
	}
	if err := tx.checkCandidate(c); err != nil {
		return err
	}
	if err := tx.absent(candKey(c.PID, c.ID), "candidate %q already exists", c.ID); err != nil {
		return err
	}
	c.Created, c.Updated = tx.now, tx.now
	return tx.putJSON(candKey(c.PID, c.ID), c)
}

// PutCandidate replaces an existing candidate of c.PID (state change, new
// validation attempt). A candidate that does not exist for c.PID is not_found.
func (tx *Tx) PutCandidate(c Candidate) error {
	if err := tx.check(); err != nil {
		return err
	}
	if err := tx.checkCandidate(c); err != nil {
		return err
	}
	old, err := tx.Candidate(c.PID, c.ID)
	if err != nil {
		return err
	}
	c.Created, c.Updated = old.Created, tx.now
	return tx.putJSON(candKey(c.PID, c.ID), c)
}

func (tx *Tx) checkCandidate(c Candidate) error {
	if err := checkID("pid", c.PID); err != nil {
		return err
	}
	if err := checkID("candidate id", c.ID); err != nil {
		return err
	}
	if err := checkRaw("candidate", c.InputSchema, c.OutputSchema, c.Tests); err != nil {
		return err
	}
	for _, v := range c.Validations {
		if err := checkRaw("validation attempt", v.Errors, v.Warnings, v.Logs, v.Tests); err != nil {
			return err
		}
	}
	return nil
}

// AddBinding binds b.Name in b.PID. A name already bound in that process is a
// conflict; bindings are never replaced. Created is set now.
func (tx *Tx) AddBinding(b Binding) error {
	if err := tx.checkIDs("pid", b.PID, "tool name", b.Name); err != nil {
		return err
	}
	if err := tx.absent(bindKey(b.PID, b.Name), "tool name %q is already bound in %s", b.Name, b.PID); err != nil {
		return err
	}
	b.Created = tx.now
	return tx.putJSON(bindKey(b.PID, b.Name), b)
}

// DeleteBinding removes the binding of name in pid and returns it; a name that is
// not bound is not_found. Used for an operator's revocation of a JIT tool: the
// candidate and the event log keep the history.
func (tx *Tx) DeleteBinding(pid, name string) (Binding, error) {
	if err := tx.check(); err != nil {
		return Binding{}, err
	}
	b, err := tx.Binding(pid, name)
	if err != nil {
		return Binding{}, err
	}
	if err := tx.b.Delete(bindKey(pid, name), nil); err != nil {
		return Binding{}, errorf(CodeIO, err, "stage write")
	}
	return b, nil
}

// PutToolResult persists the result of call r.CallID. A call has at most one
// result: a second one is a conflict. Created is set now.
func (tx *Tx) PutToolResult(r ToolResult) error {
	if err := tx.checkIDs("pid", r.PID, "call id", r.CallID); err != nil {
		return err
	}
	r.Created = tx.now
	// The encoding compacts Structured, which fails for text that is not JSON: the
	// check checkRaw makes, before the conflict as it always came.
	v, encoded := appendToolResult(tx.vbuf[:0], &r)
	if !encoded {
		if err := checkRaw("tool result", r.Structured); err != nil {
			return err
		}
	}
	if !tx.callAbove(tResult, r.PID, r.CallID) {
		if err := tx.absent(resultKey(r.PID, r.CallID), "call %q of %s already has a result", r.CallID, r.PID); err != nil {
			return err
		}
	}
	if encoded {
		tx.vbuf = v[:0]
	} else {
		var err error
		if v, err = marshal(r); err != nil {
			return errorf(CodeInvalid, err, "encode record")
		}
	}
	tx.raiseCall(tResult, r.PID, r.CallID)
	return tx.set(tx.key(tResult, r.PID, r.CallID), v)
}

// PutApproval creates or replaces approval a.ID of a.PID. Created is kept from the
// stored record (or set now for a new one).
func (tx *Tx) PutApproval(a Approval) error {
	if err := tx.checkIDs("pid", a.PID, "approval id", a.ID); err != nil {
		return err
	}
	if err := checkRaw("approval", a.Request); err != nil {
		return err
	}
	old, err := tx.Approval(a.PID, a.ID)
	switch {
	case err == nil:
		a.Created = old.Created
	case errors.Is(err, ErrNotFound):
		a.Created = tx.now
	default:
		return err
	}
	return tx.putJSON(apprKey(a.PID, a.ID), a)
}

// AddCheckpoint stores a new checkpoint of c.PID; an existing ID is a conflict.
// Created is set now.
func (tx *Tx) AddCheckpoint(c Checkpoint) error {
	if err := tx.checkIDs("pid", c.PID, "checkpoint id", c.ID); err != nil {
		return err
	}
	if err := checkRaw("checkpoint", c.Snapshot); err != nil {
		return err
	}
	if err := tx.absent(ckptKey(c.PID, c.ID), "checkpoint %q already exists", c.ID); err != nil {
		return err
	}
	c.Created = tx.now
	return tx.putJSON(ckptKey(c.PID, c.ID), c)
}

// Charge adds n (>= 0) to counter name of pid if the result stays within limit
// (limit < 0: no limit) and returns the counter. Over the limit it fails with
// limit_exceeded and leaves the counter unchanged.
func (tx *Tx) Charge(pid, name string, n, limit int64) (Budget, error) {
	if err := tx.check(); err != nil {
		return Budget{}, err
	}
	if n < 0 {
		return Budget{}, errorf(CodeInvalid, nil, "negative charge %d", n)
	}
	b, err := tx.Budget(pid, name)
	if err != nil {
		return Budget{}, err
	}
	if b.Used > math.MaxInt64-n || (limit >= 0 && b.Used+n > limit) {
		return b, errorf(CodeLimitExceeded, nil, "budget %q of %s: %d used, %d more exceeds %d", name, pid, b.Used, n, limit)
	}
	b.Used += n
	b.Updated = tx.now
	return b, tx.putJSON(budgetKey(pid, name), b)
}

// KVPut sets key to value in pid's key–value space.
func (tx *Tx) KVPut(pid, key string, value []byte) error {
	if err := tx.checkIDs("pid", pid); err != nil {
		return err
	}
	if err := checkKVKey(key); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	return tx.set(kvKey(pid, key), value)
}

// KVSetLabels records the data-flow labels of key's value in pid's key–value space;
// none removes them. Write it in the same batch as the value.
func (tx *Tx) KVSetLabels(pid, key string, labels []string) error {
	if err := tx.checkIDs("pid", pid); err != nil {
		return err
	}
	if err := checkKVKey(key); err != nil {
		return err
	}
	if len(labels) == 0 {
		if err := tx.b.Delete(kvLabelKey(pid, key), nil); err != nil {
			return errorf(CodeIO, err, "stage write")
		}
		return nil
	}
	return tx.putJSON(kvLabelKey(pid, key), labels)
}

// KVDelete removes key from pid's key–value space and reports whether it existed.
func (tx *Tx) KVDelete(pid, key string) (existed bool, err error) {
	if err := tx.checkIDs("pid", pid); err != nil {
		return false, err
	}
	if err := checkKVKey(key); err != nil {
		return false, err
	}
	existed, err = tx.exists(kvKey(pid, key))
	if err != nil {
		return false, err
	}
	if err := tx.b.Delete(kvKey(pid, key), nil); err != nil {
		return false, errorf(CodeIO, err, "stage write")
	}
	if err := tx.b.Delete(kvLabelKey(pid, key), nil); err != nil {
		return false, errorf(CodeIO, err, "stage write")
	}
	return existed, nil
}

// Append appends one event to pid's log and returns once it is durable.
func (s *Store) Append(ctx context.Context, pid, typ string, data json.RawMessage) (Event, error) {
	var e Event
	err := s.UpdateProcess(ctx, pid, func(tx *Tx) error {
		var err error
		e, err = tx.Append(pid, typ, data)
		return err
	})
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// AppendDoc appends one event whose data is a jsonexact.Doc (see Tx.AppendDoc) and
// returns once it is durable.
func (s *Store) AppendDoc(ctx context.Context, pid, typ string, data jsonexact.Doc) (Event, error) {
	var e Event
	err := s.UpdateProcess(ctx, pid, func(tx *Tx) error {
		var err error
		e, err = tx.AppendDoc(pid, typ, data)
		return err
	})
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// KVPut durably sets key to value in pid's key–value space.
func (s *Store) KVPut(ctx context.Context, pid, key string, value []byte) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.KVPut(pid, key, value) })
}

// KVDelete durably removes key from pid's key–value space.
func (s *Store) KVDelete(ctx context.Context, pid, key string) (existed bool, err error) {
	err = s.Update(ctx, func(tx *Tx) error {
		var err error
		existed, err = tx.KVDelete(pid, key)
		return err
	})
	return existed, err
}

// Charge durably adds n to budget counter name of pid within limit; see Tx.Charge.
func (s *Store) Charge(ctx context.Context, pid, name string, n, limit int64) (Budget, error) {
	var b Budget
	err := s.Update(ctx, func(tx *Tx) error {
		var err error
		b, err = tx.Charge(pid, name, n, limit)
		return err
	})
	return b, err
}
