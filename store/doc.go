// Package store keeps everything that must survive a crash, in one Pebble directory.
//
// It owns the key layout, the encodings, the format version and durable batches. It
// holds data and guarantees, never policy: what may be written, by whom, and with
// which limits is decided in package engine (and syscalls for the kv space and
// budgets), which call this package. Nothing here calls back up. Data comes from
// the engine's dispatch pipeline, the JIT lifecycle tools and the syscall providers;
// it goes to Pebble on disk and back to the engine on rehydrate.
//
// # API overview
//
//	s, err := store.Open(dir, store.Options{})   // dir from store.DefaultDir()
//	defer s.Close()
//
//	// One event, durable on return:
//	e, err := s.Append(ctx, pid, store.EventToolCalled, json.RawMessage(`{"call_id":"c1","tool":"echo"}`))
//
//	// Written now, durable with the next synced write (UpdateDeferred has Update's form):
//	err = s.UpdateDeferred(ctx, func(tx *store.Tx) error { _, err := tx.Append(pid, "note", data); return err })
//
//	// Several records and events as one atomic, synced batch:
//	err = s.Update(ctx, func(tx *store.Tx) error {
//		c, err := tx.Candidate(pid, id)        // reads see earlier writes and this tx's own
//		if err != nil { return err }
//		c.State = "registered"
//		if err := tx.PutCandidate(c); err != nil { return err }
//		if err := tx.AddBinding(store.Binding{PID: pid, Name: c.Name, ToolID: tid, CandidateID: id, Scope: "ephemeral_process"}); err != nil { return err }
//		_, err = tx.Append(pid, "jit_registered", data)
//		return err
//	})
//
// Readers (on Store and on Tx): Process, Processes, Event, Events (paginated by
// sequence), Head, Verify, Unsettled, Candidate/Candidates (scoped to the owner
// PID), Binding/Bindings, ToolResult, Approval/Approvals, Checkpoint/Checkpoints,
// Budget/Budgets, KVGet, KVList (prefix, cursor, limit), Journal.
// Writers (on Tx): Append, AppendDoc, PutProcess, CreateCandidate, PutCandidate, AddBinding,
// DeleteBinding, PutToolResult, PutApproval, AddCheckpoint, Charge, KVPut, KVDelete,
// PutJournal;
// Store has one-call forms of Append, AppendDoc, Charge, KVPut and KVDelete.
//
// Event data is exact JSON (internal/jsonexact). Append parses what it is given and
// refuses anything else with invalid. AppendDoc takes a jsonexact.Doc, a value that
// package decoded or encoded and that only it can make, and applies the same rules
// (an object, within the size bound, the call_id rules) without parsing the text
// again: the kernel writes the events of a call from values it has already decoded,
// so a call's arguments are parsed once however many records carry them.
//
// # Guarantees
//
// Every Update is acknowledged only after Pebble has synced it to the WAL
// (pebble.Sync). Each Update is one batch: after a crash it is present whole or
// absent, never torn. Concurrent writers share WAL syncs (group commit). Pebble's
// WAL files are extended with written zeros ahead of their data (walfs.go), so that a
// sync overwrites blocks inside the file instead of growing it, which on ext4 would
// also commit the new size to the journal on every sync.
//
// The group commit is Pebble's own, and the store keeps out of its way: an Update
// assembles and applies its batch under the store's write lock (so that reads in a
// transaction see every earlier write and the hash chains stay in order), hands it to
// Pebble's commit pipeline asking for a sync, releases the lock, and only then waits.
// Pebble's one WAL writer syncs everything queued so far with each sync, so the
// batches of writers that arrive while a sync is in progress share the next one, and
// a failed sync fails every batch waiting on it (after which the store refuses
// further writes). No lock is held across a sync. TestGroupCommitSharesSyncs (16
// Updates, at most 3 syncs), TestGroupCommitFailedSyncFailsEveryWaiter and
// TestGroupCommitCloseInTheMiddle pin this; BenchmarkCallWrites measures the writes
// of one JIT call at concurrency 1 and 16.
//
// UpdateDeferred applies a batch the same way (visible at once, same sequence
// numbers and hash chain) but returns without waiting for the sync: the batch is
// durable once a later synced write (Update, Sync or Close) returns. The WAL is one
// ordered log and recovery replays a prefix of it, so after a crash the surviving
// batches are a prefix of the order in which they were applied: a deferred batch is
// whole or absent, and present whenever anything applied after it is present. This is
// how a caller makes several writes durable with one sync: it defers the writes that
// lead up to an acknowledgement and syncs the acknowledgement itself. Sync makes
// everything applied so far durable (for an effect outside the store that must not
// happen without its record); it costs nothing when no deferred write waits.
// UpdateMeanwhile is Update for a caller with work to start while it waits for the
// disk (the kernel's settlement, during which a JIT call's sandbox is restored): it
// applies the batch as a deferred one, runs the caller's function, and then syncs as
// Sync does, outside the write lock, so that what the function starts is under way
// before Pebble's WAL writer is woken (RATIONALE.md). After any
// failed write the Store refuses further operations with an io error; reopening
// recovers exactly what was acknowledged (and possibly whole unacknowledged batches).
// A second Open of a directory in use fails with in_use. Open with Options.ReadOnly
// changes nothing in the directory, Pebble's own files included (it replays the WAL in
// memory), and does not create a missing one; read-only Stores of different
// processes share the directory, and a writer excludes them (readonly.go). Errors are
// *Error values with a stable Code (not_found, in_use, format_unsupported, conflict,
// io, invalid, closed, corrupt, limit_exceeded, canceled, read_only); verification
// failures are *VerifyError{PID, Seq}, which matches ErrCorrupt.
//
// Candidates, bindings, results, approvals, checkpoints, budgets and kv entries are
// keyed under their owner PID, so a lookup with another PID is an ordinary not_found
// and reveals nothing about other processes.
//
// # Event log
//
// Each process has an append-only log with dense sequence numbers from 1. Each
// event carries prev_hash (the hash of the previous event, 32 zero bytes for seq 1)
// and its own hash: SHA-256 over
//
//	"libos.event.v1" | uvarint(len pid) pid | seq (8 bytes BE) | uvarint(len type) type |
//	unix nanoseconds (8 bytes BE) | uvarint(len data) data | uvarint(len prev) prev
//
// where data is the compacted JSON object exactly as stored. The head record
// repeats the last seq and hash, so Verify also detects a removed last event.
//
// Tool calls are correlated by the top-level "call_id" string of the event data
// (CallIDField): a tool_called event opens call_id (an already open call_id is a
// conflict), and a tool_result, tool_failed or unknown_settlement event with the
// same call_id settles it; a settlement of a call_id that is not open is recorded
// and changes nothing else. All four types must carry call_id. Unsettled(pid)
// returns the tool_called events still open; the engine reports them as unknown
// settlement on rehydrate (by appending unknown_settlement, which settles them).
//
// A call ID is proven new without a read when it sorts above the process's call-ID
// ceiling (callceil.go): the largest call ID of its open markers, and separately of its
// results and of its journal entries (call ID and index), read once per process after
// Open with one reverse seek and raised by every write of such a key. Any other call ID is looked up as before, so reuse is detected
// exactly whatever IDs a caller makes; the engine's call IDs grow with time
// (randid.Ordered), so its calls take the proof without the read.
//
// # Key layout, format version 1
//
// A key is a table name, then 0x00-separated parts. PIDs and IDs are 1..256 bytes
// of UTF-8 without control characters, so no key is a prefix of another table's or
// process's keys. Values are JSON unless noted.
//
//	meta 00 format                   decimal format version ("1"); checked at Open
//	meta 00 secret 00 <name>         a 32-byte random secret (raw), made on first use (Secret)
//	proc 00 <pid>                    Process
//	head 00 <pid>                    last seq (8 bytes BE) + its hash (32 bytes)
//	evt 00 <pid> 00 <seq 8 bytes BE> Event (without call_id, derived from data)
//	open 00 <pid> 00 <call_id>       seq of the open tool_called event (8 bytes BE)
//	res 00 <pid> 00 <call_id>        ToolResult
//	cand 00 <pid> 00 <candidate_id>  Candidate, with its validation attempts
//	bind 00 <pid> 00 <tool name>     Binding
//	appr 00 <pid> 00 <approval_id>   Approval
//	ckpt 00 <pid> 00 <checkpoint_id> Checkpoint
//	budget 00 <pid> 00 <name>        Budget
//	kv 00 <pid> 00 <key>             raw value bytes
//	kvlab 00 <pid> 00 <key>          JSON array of the value's data-flow labels (absent: none)
//	jrnl 00 <pid> 00 <call_id> 00 <index 4 bytes BE>   JournalEntry
//
// The jrnl table (the syscall journal) came within format version 1: it is additive,
// no existing key changed meaning, and a store written before it has no journal.
//
// An empty directory is initialised with the current version. A directory with
// data but no version, or any other version, is refused with format_unsupported;
// changing a key or an encoding requires a new version and a named migration.
// Pebble's own format is pinned as well (pebbleFormat).
//
// # The path of one tool call
//
// The store is step 6 of 6 (package libos lists the steps): the kernel's events and the
// router's writes of one call each become a Pebble batch here. It calls nothing of the
// module above it: the fn handed to Update is the writer's own staging of its batch,
// run under the write lock, and reaches nothing but the Tx.
package store
