package store

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures Open. The zero value opens a directory on the real disk.
type Options struct {
	// FS is the file system; nil means the operating system's disk. Tests pass
	// vfs.NewCrashableMem() or an errorfs wrapper.
	FS vfs.FS
	// Now is the clock that stamps records and events; nil means time.Now.
	Now func() time.Time
	// Logf receives Pebble's error-level messages; nil discards them.
	Logf func(format string, args ...any)
	// Replicator, when set, makes every write batch durable elsewhere before it is
	// applied here (the replicated mode, package cluster). Nil: the single-host store.
	Replicator Replicator
	// ReadOnly opens the store to read it only: nothing in the directory is created,
	// changed or removed, Pebble's own files included, and every write fails with
	// read_only (ErrReadOnly). A missing or empty directory is an empty store, left as
	// it is. See readonly.go for the lock it takes and what Pebble does in this mode.
	ReadOnly bool

	// tune adjusts Pebble's options in tests (small memtables force flushes).
	tune func(*pebble.Options)
}

// Store is an open store directory. It is safe for concurrent use.
type Store struct {
	reader
	dir  string
	fs   vfs.FS
	db   *pebble.DB
	lock *pebble.Lock
	now  func() time.Time
	repl Replicator
	// readOnly refuses every write (Options.ReadOnly); unhold releases dir in this
	// process's table of open directories (holdDir), nil when dir is not on the disk.
	readOnly bool
	unhold   func()

	// mu guards closed and db's lifetime: every operation holds it shared.
	mu     sync.RWMutex
	closed bool

	// wmu serialises the assembly of write batches, so that sequence numbers and
	// read-check-write transactions see every earlier write. It is released before
	// the WAL sync is awaited: that is what lets concurrent writers share one sync.
	wmu sync.Mutex
	// heads caches the head of each log appended to since Open (under wmu): the
	// value a successful batch left, never one of a discarded batch. Append reads it
	// instead of the head record; Head and Verify always read the record.
	heads map[string]cachedHead
	// kbuf and vbuf are the scratch buffers every Tx borrows (under wmu).
	kbuf, vbuf []byte
	// ceilings holds, per process, the call-ID ceilings of its open markers and results
	// (under wmu; callceil.go).
	ceilings map[string]*callCeiling
	// inflight holds, per process, the channel closed when its pipelined batch (one
	// submitted to a PipelinedReplicator and not yet applied) is done (under wmu).
	inflight map[string]chan struct{}
	// failed is set once a write fails. Pebble cannot continue after a failed WAL
	// write or sync, and batches already assembled on top of the failed one are
	// not durable either, so the store refuses all further operations; reopening
	// recovers exactly what was synced.
	failMu sync.Mutex
	failed error
	// corrupt holds the first corruption Pebble reported (a read or a compaction found
	// a damaged file); see corruption.
	corrupt atomic.Pointer[error]
	// corrupted is closed when corrupt is first set.
	corrupted chan struct{}

	// deferred counts the batches applied by UpdateDeferred (under wmu, so in WAL
	// order); syncedDeferred is the highest count known to be durable. Sync compares
	// them to skip a disk round trip when nothing deferred is waiting.
	deferred       atomic.Uint64
	syncedDeferred atomic.Uint64
	// syncing counts the Updates (UpdateMeanwhile's included) between their start and
	// their sync's end: UpdateMeanwhile commits in one go when it is not alone.
	syncing atomic.Int32
}

// pebbleFormat pins Pebble's own on-disk format so that upgrading the module never
// silently ratchets an existing directory.
const pebbleFormat = pebble.FormatValueSeparation

// DefaultDir returns the default store directory: $LIBOS_DATA if set, else
// $XDG_DATA_HOME/libos, else ~/.local/share/libos. It does not create it; Open does.
func DefaultDir() (string, error) {
	if d := os.Getenv("LIBOS_DATA"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "libos"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errorf(CodeIO, err, "no default directory")
	}
	return filepath.Join(home, ".local", "share", "libos"), nil
}

// Open opens the store in dir, creating and initialising it if it is missing or
// empty (with Options.ReadOnly it creates nothing: see openReadOnly). It fails with
// in_use when another process (or another Store in this process) holds dir, and with
// format_unsupported when dir was written with a key layout this build does not know.
func Open(dir string, opts Options) (*Store, error) {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if opts.ReadOnly {
		return openReadOnly(dir, fs, now, opts)
	}
	unhold, err := holdDir(dir, fs)
	if err != nil {
		return nil, err
	}
	s, err := openReadWrite(dir, fs, now, opts)
	if err != nil {
		unhold()
		return nil, err
	}
	s.unhold = unhold
	return s, nil
}

func openReadWrite(dir string, fs vfs.FS, now func() time.Time, opts Options) (*Store, error) {
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return nil, errorf(CodeIO, err, "create %s", dir)
	}
	lock, err := lockDir(dir, fs)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, fs: fs, lock: lock, now: now, repl: opts.Replicator, corrupted: make(chan struct{})}
	wfs := &walFS{FS: fs}
	po := s.pebbleOptions(wfs, opts)
	wfs.rotated = int64(po.MemTableSize)
	if wfs.rotated == 0 {
		wfs.rotated = 4 << 20 // Pebble's default MemTableSize
	}
	if err := s.openDB(po); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.checkFormat(); err != nil {
		s.db.Close()
		lock.Close()
		return nil, err
	}
	return s, nil
}

// lockDir takes the lock of dir through fs: Pebble's LOCK file, which a read-only
// Store's fs locks shared (readonly.go).
func lockDir(dir string, fs vfs.FS) (*pebble.Lock, error) {
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		if lockContended(err) {
			return nil, errorf(CodeInUse, err, "%s is in use by another process", dir)
		}
		return nil, errorf(CodeIO, err, "lock %s", dir)
	}
	return lock, nil
}

// pebbleOptions are the Pebble options of s, on the file system fs, with s.lock.
func (s *Store) pebbleOptions(fs vfs.FS, opts Options) *pebble.Options {
	po := &pebble.Options{
		FS:                 fs,
		Lock:               s.lock,
		FormatMajorVersion: pebbleFormat,
		Logger:             pebbleLogger{s: s, logf: opts.Logf},
		// Pebble's default answer to corruption is a fatal log call, which would end
		// the process from a read or a background compaction. The store records it
		// instead: the read that found it fails with a corrupt error, and writes are
		// refused from then on (see corruption).
		EventListener: &pebble.EventListener{
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				s.noteCorrupt(fmt.Errorf("%s", info))
			},
			BackgroundError: func(err error) {
				if pebble.IsCorruptionError(err) {
					s.noteCorrupt(err)
				}
				if opts.Logf != nil {
					opts.Logf("pebble: background error: %v", err)
				}
			},
		},
	}
	// Bloom filters in every table (lower levels inherit L0's policy): the write
	// path looks up keys that are usually absent (a new call's open marker, a result
	// not yet written), and without a filter each miss reads every level.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	if opts.tune != nil {
		opts.tune(po)
	}
	return po
}

// openDB opens Pebble in s.dir with po and makes s read from it.
func (s *Store) openDB(po *pebble.Options) error {
	db, err := openPebble(s.dir, po)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return err
		}
		return readErr(err, "open %s", s.dir)
	}
	s.db = db
	s.reader = reader{r: db, enter: s.enterRead}
	return nil
}

// lockContended tells a lock held elsewhere (EAGAIN/EACCES from fcntl, or Pebble's
// own in-process check) from a failure to take the lock at all.
func lockContended(err error) bool {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return false // creating the lock file failed: not contention
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// openPebble turns a fatal error during Pebble's open into an error value.
func openPebble(dir string, po *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(fatalError); ok {
				err = errorf(CodeIO, nil, "open %s: %s", dir, string(f))
				return
			}
			panic(r)
		}
	}()
	return pebble.Open(dir, po)
}

// checkFormat initialises an empty store (a read-only one stays empty, without a
// format version) and refuses a layout it does not know.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(formatKey())
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		it, err := s.db.NewIter(nil)
		if err != nil {
			return readErr(err, "read")
		}
		empty := !it.First()
		it.Close()
		if !empty {
			return errorf(CodeFormatUnsupported, nil, "%s holds data without a format version", s.dir)
		}
		if s.readOnly {
			return nil
		}
		b := s.db.NewBatch()
		defer b.Close()
		b.Set(formatKey(), []byte(strconv.Itoa(formatVersion)), nil)
		return s.commit(b)
	case err != nil:
		return readErr(err, "read format version")
	}
	defer closer.Close()
	n, perr := strconv.ParseUint(string(v), 10, 32)
	if perr != nil {
		return errorf(CodeFormatUnsupported, nil, "unreadable format version %q in %s", v, s.dir)
	}
	if n != formatVersion {
		return errorf(CodeFormatUnsupported, nil, "%s has format version %d; this build reads version %d", s.dir, n, formatVersion)
	}
	return nil
}

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

// ReadOnly reports whether the store was opened read-only (Options.ReadOnly): every
// write fails with read_only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Close waits for operations in flight, then closes the store and releases the
// directory. Closing syncs the WAL, so deferred writes are durable after a Close that
// returns nil. Closing twice is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.failure() == nil {
		err = s.db.Close()
	}
	// After a failed write Pebble's commit pipeline may hold its own locks forever,
	// so its Close could block: the instance is abandoned as if the process had
	// crashed, which is what reopening recovers from.
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	}
	if s.unhold != nil {
		s.unhold()
	}
	if err != nil {
		return errorf(CodeIO, err, "close")
	}
	return nil
}

// enterUpdate is how every write begins: a cancelled ctx submits nothing, and the
// store must be open (enterRead); release ends it.
func (s *Store) enterUpdate(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf(CodeCanceled, err, "update not submitted")
	}
	if err := s.writable(); err != nil {
		return nil, err
	}
	return s.enterRead()
}

// writable refuses a write on a read-only store, before anything is staged.
func (s *Store) writable() error {
	if s.readOnly {
		return errorf(CodeReadOnly, nil, "%s is open read-only; nothing was written", s.dir)
	}
	return nil
}

func (s *Store) enterRead() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errorf(CodeClosed, nil, "closed")
	}
	if f := s.failure(); f != nil {
		s.mu.RUnlock()
		return nil, errorf(CodeIO, f, "unusable after a failed write; reopen")
	}
	return s.mu.RUnlock, nil
}

// Update runs fn with a transaction and commits everything fn wrote (records and
// events) as one synced, atomic batch. When Update returns nil every write of fn is
// durable, and so is every write applied before it (UpdateDeferred's included); when
// it returns an error none of fn's writes is acknowledged (after a crash each is whole
// or absent, never torn).
//
// Writers are serialised while fn runs, so reads inside fn see every earlier write
// and a read-check-write in fn cannot race another Update. fn must therefore be
// quick and must not call back into the Store. fn runs exactly once; when it returns
// an error nothing is written. Once the batch is submitted Update waits for the
// sync regardless of ctx.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	release, err := s.enterUpdate(ctx)
	if err != nil {
		return err
	}
	defer release()
	s.syncing.Add(1)
	defer s.syncing.Add(-1)
	b, covers, err := s.prepare(ctx, fn, false, QuotaFrom(ctx))
	if err != nil || b == nil {
		return err
	}
	return s.awaitSync(b, covers)
}

// UpdateMeanwhile is Update that runs meanwhile once before it returns: after the
// batch is applied and visible, outside the store's write lock, just before the store
// asks for the sync that makes it durable; or, when nothing was applied (fn failed or
// wrote nothing, the store refused the batch), before the error is returned. It is for
// work to start while the caller waits for the disk: meanwhile should only start it (a
// goroutine), since the sync is not asked for until it returns, and must not call into
// the Store. The durability contract is Update's: nil means that fn's writes, and
// every write applied before them, are on disk.
//
// Update asks for the sync with the batch itself. Here the batch is applied as a
// deferred one and made durable by a sync of a record of its own (syncTo), one more
// commit (a few microseconds), so that what meanwhile starts is started before the WAL
// writer is woken. That is the point on this two-CPU machine: starting a goroutine
// wakes an idle thread, which costs the caller a futex wake (about 20 µs on this VM),
// and so does waking the WAL writer; started just before, the writer's wake finds a
// thread already awake and costs nothing, the caller parks at once, and its P runs the
// writer, which starts the sync while the other thread runs what meanwhile started.
// Traced at one call at a time (go test -trace, 800 calls): from the WAL writer's wake
// to the caller parking, 25–29 µs p50 before, 1.0 µs after. Without work to start, the
// split gains nothing (the wake of the writer then pays the futex; 28.5 → 25 µs), so
// Update keeps the single commit, and so does UpdateMeanwhile while another Update is
// waiting for a sync (below).
func (s *Store) UpdateMeanwhile(ctx context.Context, fn func(tx *Tx) error, meanwhile func()) error {
	if meanwhile == nil {
		return s.Update(ctx, fn)
	}
	defer func() {
		if meanwhile != nil {
			meanwhile()
		}
	}()
	release, err := s.enterUpdate(ctx)
	if err != nil {
		return err
	}
	defer release()
	alone := s.syncing.Add(1) == 1
	defer s.syncing.Add(-1)
	if !alone {
		// Other writers are waiting for syncs (concurrent calls): the CPUs are busy,
		// so a wake needs no idle thread woken, and the extra commit is only a cost
		// (5–9 % fewer calls/s at 16 concurrent calls in three interleaved pairs at
		// load 10; within the noise in others). The batch asks for its sync itself and
		// meanwhile runs right after, as the sync is under way.
		b, covers, err := s.prepare(ctx, fn, false, QuotaFrom(ctx))
		if err != nil || b == nil {
			return err
		}
		m := meanwhile
		meanwhile = nil
		m()
		return s.awaitSync(b, covers)
	}
	b, covers, err := s.prepare(ctx, fn, true, QuotaFrom(ctx))
	if b == nil {
		return err
	}
	b.Close()
	m := meanwhile
	meanwhile = nil
	m()
	return s.syncTo(covers)
}

// UpdateDeferred is Update without the wait for the disk. The batch is built,
// checked and applied exactly as by Update (the same serialisation, sequence numbers
// and hash chain) and is visible to every reader when UpdateDeferred returns nil, but
// it is only written to the WAL, not yet synced: it becomes durable with the next
// synced write (any Update, Sync, or Close), whoever makes it.
//
// Pebble's WAL is one ordered log and recovery replays a prefix of it, so after a
// crash a deferred batch is whole or absent, and it is present whenever any write
// applied after it is present. A caller may therefore defer every write that leads up
// to an acknowledgement and sync only the acknowledgement: if the acknowledgement
// survives, so does everything before it. A deferred write must not be acknowledged
// to anyone (a model, an operator, another system) before such a synced write.
func (s *Store) UpdateDeferred(ctx context.Context, fn func(tx *Tx) error) error {
	release, err := s.enterUpdate(ctx)
	if err != nil {
		return err
	}
	defer release()
	b, _, err := s.prepare(ctx, fn, true, QuotaFrom(ctx))
	if b != nil {
		b.Close()
	}
	return err
}

// Sync makes every write applied before it durable, deferred ones included, and
// returns when they are on disk. It costs nothing when no deferred write is waiting.
// Call it before an effect outside the store that must not happen unless the writes
// leading up to it survive a crash.
func (s *Store) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return errorf(CodeCanceled, err, "sync not submitted")
	}
	release, err := s.enterRead()
	if err != nil {
		return err
	}
	defer release()
	return s.syncTo(s.deferred.Load())
}

// syncTo makes the deferred batches up to number covers durable, with everything
// written to the WAL before the call, and returns when they are on disk; it skips the
// disk when a sync that covers them has already completed. It commits a WAL record
// that holds no key, with a sync: syncing it syncs every record before it. It needs no
// wmu: every batch it covers is already ahead of that record in the WAL.
func (s *Store) syncTo(covers uint64) error {
	if covers <= s.syncedDeferred.Load() {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.LogData(nil, nil); err != nil {
		return errorf(CodeIO, err, "stage sync")
	}
	if err := s.commit(b); err != nil {
		return err
	}
	s.synced(covers)
	return nil
}

// synced notes that every deferred batch up to number covers is durable.
func (s *Store) synced(covers uint64) {
	for {
		cur := s.syncedDeferred.Load()
		if covers <= cur || s.syncedDeferred.CompareAndSwap(cur, covers) {
			return
		}
	}
}

// prepare runs fn under wmu and submits its batch: queued for the next WAL sync, or
// with deferred written without asking for one. It returns a nil batch when fn wrote
// nothing, and the number of deferred batches applied before this one (which a sync
// of this batch makes durable too).
func (s *Store) prepare(ctx context.Context, fn func(tx *Tx) error, deferred bool, quota *Quota) (b *pebble.Batch, covers uint64, err error) {
	s.wmu.Lock()
	// A transaction that may read any process waits for every pipelined batch: its
	// reads must see them.
	s.drainLocked("")
	defer s.wmu.Unlock()
	tx, err := s.runTx(quota, fn)
	if tx == nil {
		return nil, 0, err
	}
	submitted := false
	defer func() {
		if !submitted {
			tx.b.Close()
		}
	}()
	if s.repl != nil {
		// Tx stays active for the position reads; fn is done writing.
		tx.active = true
		err = s.replicate(ctx, tx)
		tx.active = false
		if err != nil {
			return nil, 0, err
		}
	}
	if deferred {
		err = s.applyDeferred(tx.b)
	} else {
		err = s.applyNoSyncWait(tx.b)
	}
	if err != nil {
		return nil, 0, err
	}
	submitted = true
	s.cacheHeads(tx.heads)
	if deferred {
		s.deferred.Add(1)
	}
	return tx.b, s.deferred.Load(), nil
}

// awaitSync waits for the WAL sync that covers b (submitted by prepare or
// preparePipelined) and records what it made durable: the caller is acknowledged only
// after it.
func (s *Store) awaitSync(b *pebble.Batch, covers uint64) error {
	defer b.Close()
	if err := b.SyncWait(); err != nil {
		return s.fail(err)
	}
	s.synced(covers)
	return nil
}

// runTx runs fn in a new transaction; the caller holds wmu. It refuses to start on a
// store that a failed write or corruption has made unusable. It returns a nil Tx when fn
// failed or wrote nothing (its batch closed); otherwise the caller owns tx.b: it applies
// the batch or closes it.
func (s *Store) runTx(quota *Quota, fn func(tx *Tx) error) (*Tx, error) {
	if f := s.failure(); f != nil {
		return nil, errorf(CodeIO, f, "unusable after a failed write; reopen")
	}
	if c := s.corruption(); c != nil {
		return nil, newError(CodeCorrupt, c, "writes refused: "+CorruptAdvice)
	}
	tx := &Tx{s: s, b: s.db.NewIndexedBatch(), now: s.now().UTC(), quota: quota, kbuf: s.kbuf, vbuf: s.vbuf}
	tx.reader = reader{r: tx.b, enter: tx.enterRead}
	kept := false
	defer func() {
		if !kept {
			tx.b.Close() // fn failed, panicked or wrote nothing
		}
		// The buffers go back for the next Tx unless a large record grew them.
		s.kbuf, s.vbuf = keepScratch(tx.kbuf), keepScratch(tx.vbuf)
	}()
	tx.active = true
	err := fn(tx)
	tx.active = false
	if err != nil || tx.b.Empty() {
		return nil, err
	}
	kept = true
	return tx, nil
}

// maxScratch bounds the scratch buffers a Store keeps between transactions.
const maxScratch = 64 << 10

func keepScratch(b []byte) []byte {
	if cap(b) > maxScratch {
		return nil
	}
	return b[:0]
}

// maxCachedHeads bounds the head cache; past it the cache starts over.
const maxCachedHeads = 4096

// cacheHeads records the heads a batch just applied has written (under wmu).
func (s *Store) cacheHeads(staged []stagedHead) {
	if len(staged) == 0 {
		return
	}
	if s.heads == nil || len(s.heads)+len(staged) > maxCachedHeads {
		s.heads = make(map[string]cachedHead, len(staged))
	}
	for _, h := range staged {
		s.heads[h.pid] = h.cachedHead
	}
}

// applyDeferred writes b to the WAL and the memtable without asking for a sync.
func (s *Store) applyDeferred(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.fail(fmt.Errorf("%v", r))
		}
	}()
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return s.fail(err)
	}
	return nil
}

// applyNoSyncWait hands b to Pebble's commit pipeline, which makes it visible and
// queues it for the next WAL sync; concurrent batches share that sync (group commit).
func (s *Store) applyNoSyncWait(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// Pebble reports a failed WAL write by a fatal log call or a panic
			// while holding its commit locks.
			err = s.fail(fmt.Errorf("%v", r))
		}
	}()
	if err := s.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		return s.fail(err)
	}
	return nil
}

// commit writes b and waits for its sync; used by Open and Sync.
func (s *Store) commit(b *pebble.Batch) error {
	if err := s.applyNoSyncWait(b); err != nil {
		return err
	}
	if err := b.SyncWait(); err != nil {
		return s.fail(err)
	}
	return nil
}

// fail records the first write failure and returns it as an io error.
func (s *Store) fail(cause error) error {
	s.failMu.Lock()
	if s.failed == nil {
		s.failed = cause
	}
	s.failMu.Unlock()
	return errorf(CodeIO, cause, "write failed, nothing acknowledged")
}

// noteCorrupt records the first corruption Pebble reported, from any goroutine.
func (s *Store) noteCorrupt(err error) {
	if s.corrupt.CompareAndSwap(nil, &err) {
		close(s.corrupted)
	}
}

// Corrupted is closed once corruption is found in the store's files (by a read or a
// background compaction): a long-running server watches it to stop, instead of
// serving reads from a store whose writes are refused and whose compactions retry
// forever.
func (s *Store) Corrupted() <-chan struct{} { return s.corrupted }

// corruption returns the first corruption Pebble reported since Open, or nil. After one,
// writes are refused (a compaction cannot move past a damaged table, and new data would
// only pile up above it); reads go on, and those that reach damaged data fail.
func (s *Store) corruption() error {
	if p := s.corrupt.Load(); p != nil {
		return *p
	}
	return nil
}

// Corruption returns the corruption found in the store's files since Open (by a read or
// by a background compaction) as a corrupt error, or nil when none was found.
func (s *Store) Corruption() error {
	if c := s.corruption(); c != nil {
		return newError(CodeCorrupt, c, CorruptAdvice)
	}
	return nil
}

func (s *Store) failure() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failed
}

type fatalError string

// pebbleLogger keeps Pebble quiet and turns its fatal errors (which would exit the
// process) into panics that the write path recovers as io errors.
type pebbleLogger struct {
	s    *Store
	logf func(string, ...any)
}

func (l pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.logf != nil {
		l.logf("pebble: "+format, args...)
	}
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fatalError(fmt.Sprintf(format, args...)))
}
