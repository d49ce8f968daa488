package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Replicator makes a write batch durable beyond this host before the store applies it:
// the seam of the replicated mode (package cluster implements it on a JetStream
// stream). The store calls Replicate under its write lock, after the transaction's fn
// has built the batch and before the batch is applied, so batches reach the
// Replicator in the order they are applied and each one sees every earlier write. An
// error refuses the batch: nothing of it is applied or acknowledged, and the error is
// returned to the writer as is.
type Replicator interface {
	// Replicate makes b durable and returns the process whose log position it moved
	// (one of b.PIDs) and the position the replicated log gave the batch.
	Replicate(ctx context.Context, b *Batch) (pid string, pos uint64, err error)
}

// PipelinedReplicator is a Replicator that can have several batches in flight, each
// of a different process: Submit hands b over (in the order the store calls it, under
// its write lock) and returns at once; wait returns what Replicate would have. The
// store submits only batches of one process (UpdateProcess) this way, at most one
// per process at a time, and applies each after its wait returns.
type PipelinedReplicator interface {
	Replicator
	Submit(ctx context.Context, b *Batch) (wait func() (pid string, pos uint64, err error), err error)
}

// Batch is a write batch as the Replicator sees it.
type Batch struct {
	// PIDs are the processes whose keys the batch writes, sorted.
	PIDs []string
	// Positions[i] is the replicated position of PIDs[i]: the position of the last
	// batch replicated on its behalf, 0 when there is none.
	Positions []uint64
	// Ops is the batch in its portable encoding, the form ApplyReplicated takes.
	Ops []byte
}

// Replicated is a batch read back from the replicated log, to apply on a host that did
// not write it.
type Replicated struct {
	// Pos is the batch's position in the log; PID the process whose position it moved;
	// Prev that process's position before it (the log's compare-and-set guarantees it).
	Pos  uint64
	PID  string
	Prev uint64
	// Ops is Batch.Ops as the writer replicated it.
	Ops []byte
	// Skip: the message at Pos on PID's subject is not a batch this host applies (the
	// replicated log refused it). Nothing of it is written; PID's position moves to
	// Pos, since the log's compare-and-set of PID's next batch expects it there.
	// Prev and Ops are not read.
	Skip bool
}

const (
	tRepl = "repl"
	// opsMagic starts the portable encoding of a batch: then, per write, a kind byte
	// (opSet, opDelete), uvarint key length, key and, for opSet, uvarint value length
	// and value.
	opsMagic = "libos.batch.v1"
	opSet    = 1
	opDelete = 2
)

func replKey(pid string) []byte { return key(tRepl, pid) }

// appliedKey holds the position up to which this host applied the replicated log.
func appliedKey() []byte { return key(tMeta, "replicated") }

// replTables are the tables a replicated batch may write: every per-process table.
// meta and repl are this host's own bookkeeping and never travel.
var replTables = map[string]bool{tProc: true, tHead: true, tEvent: true, tOpen: true, tResult: true, tCand: true,
	tBind: true, tAppr: true, tCkpt: true, tBudget: true, tKV: true, tKVLabel: true, tJournal: true}

// keyPID returns the table and process of a key of a per-process table.
func keyPID(k []byte) (table, pid string, ok bool) {
	i := bytes.IndexByte(k, sep)
	if i < 0 {
		return "", "", false
	}
	table = string(k[:i])
	rest := k[i+1:]
	if j := bytes.IndexByte(rest, sep); j >= 0 {
		rest = rest[:j]
	}
	if !replTables[table] || checkID("pid", string(rest)) != nil {
		return "", "", false
	}
	return table, string(rest), true
}

// encodeOps writes b's entries in the portable encoding and returns the processes
// they belong to.
func encodeOps(b *pebble.Batch) ([]byte, []string, error) {
	out := []byte(opsMagic)
	pids := map[string]bool{}
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return nil, nil, errorf(CodeIO, err, "read batch")
		}
		if !ok {
			break
		}
		_, pid, kok := keyPID(k)
		if !kok {
			return nil, nil, errorf(CodeInvalid, nil, "batch writes key %q outside the per-process tables", k)
		}
		pids[pid] = true
		switch kind {
		case pebble.InternalKeyKindSet:
			out = append(out, opSet)
			out = binary.AppendUvarint(out, uint64(len(k)))
			out = append(out, k...)
			out = binary.AppendUvarint(out, uint64(len(v)))
			out = append(out, v...)
		case pebble.InternalKeyKindDelete:
			out = append(out, opDelete)
			out = binary.AppendUvarint(out, uint64(len(k)))
			out = append(out, k...)
		default:
			return nil, nil, errorf(CodeInvalid, nil, "batch holds a write of kind %v", kind)
		}
	}
	names := make([]string, 0, len(pids))
	for p := range pids {
		names = append(names, p)
	}
	slices.Sort(names)
	return out, names, nil
}

// CheckOps reports whether ops is a batch in the portable encoding that
// ApplyReplicated can apply: well formed, every key of a per-process table. The error
// is ErrCorrupt, saying what is wrong.
func CheckOps(ops []byte) error {
	_, err := decodeOps(ops, nil)
	return err
}

// CheckPID reports whether pid is a process ID the store takes (ErrInvalid if not).
func CheckPID(pid string) error { return checkID("pid", pid) }

// decodeOps stages the writes of ops in b and returns the processes they touch; with
// b nil it only checks ops (and returns no processes). Every key must be of a
// per-process table: a replicated batch never writes this host's bookkeeping.
func decodeOps(ops []byte, b *pebble.Batch) (map[string]bool, error) {
	if !bytes.HasPrefix(ops, []byte(opsMagic)) {
		return nil, errorf(CodeCorrupt, nil, "replicated batch: not %s", opsMagic)
	}
	p := ops[len(opsMagic):]
	pids := map[string]bool{}
	read := func() ([]byte, bool) {
		n, w := binary.Uvarint(p)
		if w <= 0 || n > uint64(len(p)-w) {
			return nil, false
		}
		v := p[w : w+int(n)]
		p = p[w+int(n):]
		return v, true
	}
	for len(p) > 0 {
		kind := p[0]
		p = p[1:]
		k, ok := read()
		if !ok {
			return nil, errorf(CodeCorrupt, nil, "replicated batch: truncated key")
		}
		_, pid, kok := keyPID(k)
		if !kok {
			return nil, errorf(CodeCorrupt, nil, "replicated batch writes key %q outside the per-process tables", k)
		}
		if b != nil {
			pids[pid] = true
		}
		switch kind {
		case opSet:
			v, ok := read()
			if !ok {
				return nil, errorf(CodeCorrupt, nil, "replicated batch: truncated value")
			}
			if b == nil {
				break
			}
			if err := b.Set(k, v, nil); err != nil {
				return nil, errorf(CodeIO, err, "stage write")
			}
		case opDelete:
			if b == nil {
				break
			}
			if err := b.Delete(k, nil); err != nil {
				return nil, errorf(CodeIO, err, "stage write")
			}
		default:
			return nil, errorf(CodeCorrupt, nil, "replicated batch: unknown write kind %d", kind)
		}
	}
	return pids, nil
}

// drainLocked waits, with wmu held on entry and on return, until no pipelined batch
// of pid (of any process when pid is "") is in flight.
func (s *Store) drainLocked(pid string) {
	for {
		var ch chan struct{}
		if pid != "" {
			ch = s.inflight[pid]
		} else {
			for _, c := range s.inflight {
				ch = c
				break
			}
		}
		if ch == nil {
			return
		}
		s.wmu.Unlock()
		<-ch
		s.wmu.Lock()
	}
}

// UpdateProcess is Update for a fn that writes pid's keys only (a write of another
// process is refused as invalid). In the replicated mode, with a PipelinedReplicator,
// batches of different processes are then in flight to the replicated log together
// instead of one after the other; batches of one process still go one at a time, each
// read-check-write seeing the one before. Without one it is Update.
func (s *Store) UpdateProcess(ctx context.Context, pid string, fn func(tx *Tx) error) error {
	pr, ok := s.repl.(PipelinedReplicator)
	if !ok {
		return s.Update(ctx, fn)
	}
	release, err := s.enterUpdate(ctx)
	if err != nil {
		return err
	}
	defer release()
	b, covers, err := s.preparePipelined(ctx, pr, pid, fn)
	if err != nil || b == nil {
		return err
	}
	return s.awaitSync(b, covers)
}

// preparePipelined runs fn under wmu once pid has no batch in flight, submits the
// batch to pr, releases wmu while the replicated log acknowledges it, then applies it
// under wmu (queued for the next WAL sync).
func (s *Store) preparePipelined(ctx context.Context, pr PipelinedReplicator, pid string, fn func(tx *Tx) error) (*pebble.Batch, uint64, error) {
	if err := checkID("pid", pid); err != nil {
		return nil, 0, err
	}
	s.wmu.Lock()
	locked := true
	defer func() {
		if locked {
			s.wmu.Unlock()
		}
	}()
	s.drainLocked(pid)
	tx, err := s.runTx(QuotaFrom(ctx), fn)
	if tx == nil {
		return nil, 0, err
	}
	submitted := false
	defer func() {
		if !submitted {
			tx.b.Close()
		}
	}()
	ops, pids, err := encodeOps(tx.b)
	if err != nil {
		return nil, 0, err
	}
	if len(pids) != 1 || pids[0] != pid {
		return nil, 0, errorf(CodeInvalid, nil, "UpdateProcess(%s) wrote processes %v", pid, pids)
	}
	tx.active = true
	prev, err := tx.position(pid)
	tx.active = false
	if err != nil {
		return nil, 0, err
	}
	wait, err := pr.Submit(ctx, &Batch{PIDs: pids, Positions: []uint64{prev}, Ops: ops})
	if err != nil {
		return nil, 0, err
	}
	done := make(chan struct{})
	if s.inflight == nil {
		s.inflight = map[string]chan struct{}{}
	}
	s.inflight[pid] = done
	s.wmu.Unlock()
	got, pos, werr := wait()
	s.wmu.Lock()
	delete(s.inflight, pid)
	close(done)
	if werr != nil {
		return nil, 0, werr
	}
	if got != pid {
		return nil, 0, errorf(CodeInvalid, nil, "the replicator placed the batch on %q, not %q", got, pid)
	}
	if err := tx.set(replKey(pid), binary.BigEndian.AppendUint64(nil, pos)); err != nil {
		return nil, 0, err
	}
	if f := s.failure(); f != nil {
		// Acknowledged by the log, not applied here: the applier of the log brings
		// it in once the store is reopened.
		return nil, 0, errorf(CodeIO, f, "unusable after a failed write; reopen")
	}
	if err := s.applyNoSyncWait(tx.b); err != nil {
		return nil, 0, err
	}
	submitted = true
	s.cacheHeads(tx.heads)
	return tx.b, s.deferred.Load(), nil
}

// replicate hands tx's batch to the Replicator and, once it is durable there, stages
// the position it got. Called by prepare under wmu.
func (s *Store) replicate(ctx context.Context, tx *Tx) error {
	ops, pids, err := encodeOps(tx.b)
	if err != nil {
		return err
	}
	b := &Batch{PIDs: pids, Positions: make([]uint64, len(pids)), Ops: ops}
	for i, pid := range pids {
		if b.Positions[i], err = tx.position(pid); err != nil {
			return err
		}
	}
	pid, pos, err := s.repl.Replicate(ctx, b)
	if err != nil {
		return err
	}
	if !slices.Contains(pids, pid) {
		return errorf(CodeInvalid, nil, "the replicator placed the batch on %q, which it does not write", pid)
	}
	return tx.set(replKey(pid), binary.BigEndian.AppendUint64(nil, pos))
}

func (r *reader) position(pid string) (uint64, error) {
	v, err := r.get(replKey(pid), "replicated position")
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errorf(CodeCorrupt, nil, "replicated position of %s is malformed", pid)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Position returns the replicated position of pid: the log position of the last batch
// replicated on its behalf, 0 when none was (or the store is not replicated).
func (s *Store) Position(pid string) (uint64, error) {
	release, err := s.enterRead()
	if err != nil {
		return 0, err
	}
	defer release()
	return s.position(pid)
}

// Applied returns the position up to which ApplyReplicated has gone through the log.
func (s *Store) Applied() (uint64, error) {
	release, err := s.enterRead()
	if err != nil {
		return 0, err
	}
	defer release()
	return s.applied()
}

// applied is Applied for a caller that holds the read lock already: taking it twice
// deadlocks once a Close waits for the write lock between the two.
func (s *Store) applied() (uint64, error) {
	v, err := s.get(appliedKey(), "applied position")
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errorf(CodeCorrupt, nil, "applied position is malformed")
	}
	return binary.BigEndian.Uint64(v), nil
}

// ApplyReplicated applies a batch of the replicated log, in log order, and reports
// whether it wrote it: a batch at or below the applied position, or one this host
// wrote itself (its process's position already covers it), is skipped. A batch whose
// Prev is not its process's position here is refused as corrupt: this copy and the
// log have forked, which the log's compare-and-set rules out. The write is not synced
// (the log is the durable copy; a crash replays it from Applied on).
func (s *Store) ApplyReplicated(ctx context.Context, r Replicated) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, errorf(CodeCanceled, err, "apply not submitted")
	}
	if err := checkID("pid", r.PID); err != nil {
		return false, err
	}
	if err := s.writable(); err != nil {
		return false, err
	}
	release, err := s.enterRead()
	if err != nil {
		return false, err
	}
	defer release()
	s.wmu.Lock()
	// This host's own batch of r.PID may be acknowledged and not yet applied here:
	// let it be applied first (the position check below then skips r).
	s.drainLocked(r.PID)
	defer s.wmu.Unlock()
	if f := s.failure(); f != nil {
		return false, errorf(CodeIO, f, "unusable after a failed write; reopen")
	}
	applied, err := s.applied()
	if err != nil {
		return false, err
	}
	if r.Pos <= applied {
		return false, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(appliedKey(), binary.BigEndian.AppendUint64(nil, r.Pos), nil); err != nil {
		return false, errorf(CodeIO, err, "stage write")
	}
	have, err := s.position(r.PID)
	if err != nil {
		return false, err
	}
	write := r.Pos > have
	if write && r.Skip {
		if err := b.Set(replKey(r.PID), binary.BigEndian.AppendUint64(nil, r.Pos), nil); err != nil {
			return false, errorf(CodeIO, err, "stage write")
		}
		write = false
	} else if write {
		if have != r.Prev {
			return false, errorf(CodeCorrupt, nil, "replicated batch %d of %s follows position %d, this copy is at %d", r.Pos, r.PID, r.Prev, have)
		}
		pids, err := decodeOps(r.Ops, b)
		if err != nil {
			return false, err
		}
		if err := b.Set(replKey(r.PID), binary.BigEndian.AppendUint64(nil, r.Pos), nil); err != nil {
			return false, errorf(CodeIO, err, "stage write")
		}
		// The head cache holds what this host appended; another host's events
		// replace it.
		for pid := range pids {
			delete(s.heads, pid)
			delete(s.ceilings, pid)
		}
	}
	if err := s.applyDeferred(b); err != nil {
		return false, err
	}
	s.deferred.Add(1)
	return write, nil
}

// EmptyBatch is the portable encoding of a batch that writes nothing: a replicated
// batch that only moves its process's position (the replicated mode's fence).
func EmptyBatch() []byte { return []byte(opsMagic) }
