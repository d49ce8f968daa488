package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/internal/randid"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Limits bound what one tool call may carry (image.Limits: an image names them too).
// In Config the zero value of a field means its default; in ProcessConfig it means
// "the kernel's limit", and a set field can only tighten the kernel's limit.
type Limits = image.Limits

// Default limits.
const (
	DefaultMaxArgumentBytes = 64 << 10
	DefaultMaxResultBytes   = 64 << 10
	DefaultMaxDepth         = 64
	// One call fanning out through tools.call once wrote 17,508 events and 16 MB in
	// two seconds; a call of readable work appends a handful.
	DefaultMaxCallEvents     = 4096
	DefaultMaxCallEventBytes = 8 << 20
	DefaultMaxLogEvents      = 10_000_000
	DefaultMaxLogBytes       = 1 << 30
)

// frameOverhead is how much larger than its arguments a frame may be: the envelope and
// the string escaping of OpenAI-style arguments (at most 6 bytes per byte, for \u00XX).
const frameOverhead = 4 << 10

func checkLimits(l Limits, where string) error {
	if l.MaxArgumentBytes < 0 || l.MaxResultBytes < 0 || l.MaxDepth < 0 || l.MaxCalls < 0 ||
		l.MaxCallEvents < 0 || l.MaxCallEventBytes < 0 || l.MaxLogEvents < 0 || l.MaxLogBytes < 0 {
		return errorf(CodeInvalidConfig, "%s: limits must not be negative", where)
	}
	return nil
}

func withDefaults(l Limits) Limits {
	orDefault(&l.MaxArgumentBytes, DefaultMaxArgumentBytes)
	orDefault(&l.MaxResultBytes, DefaultMaxResultBytes)
	orDefault(&l.MaxDepth, DefaultMaxDepth)
	orDefault(&l.MaxCallEvents, DefaultMaxCallEvents)
	orDefault(&l.MaxCallEventBytes, DefaultMaxCallEventBytes)
	orDefault(&l.MaxLogEvents, DefaultMaxLogEvents)
	orDefault(&l.MaxLogBytes, DefaultMaxLogBytes)
	return l
}

// orDefault sets *v to def when it is zero (not set).
func orDefault[T int | int64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// tighten applies a process's limits p over the kernel's l.
func tighten(l, p Limits) Limits {
	l.MaxArgumentBytes = tighter(l.MaxArgumentBytes, p.MaxArgumentBytes)
	l.MaxResultBytes = tighter(l.MaxResultBytes, p.MaxResultBytes)
	l.MaxDepth = tighter(l.MaxDepth, p.MaxDepth)
	if p.MaxCalls > 0 && (l.MaxCalls == 0 || p.MaxCalls < l.MaxCalls) {
		l.MaxCalls = p.MaxCalls
	}
	l.MaxCallEvents = tighter(l.MaxCallEvents, p.MaxCallEvents)
	l.MaxCallEventBytes = tighter(l.MaxCallEventBytes, p.MaxCallEventBytes)
	l.MaxLogEvents = tighter(l.MaxLogEvents, p.MaxLogEvents)
	l.MaxLogBytes = tighter(l.MaxLogBytes, p.MaxLogBytes)
	return l
}

// tighter is p when it is set and below k, else k: a process only tightens a limit.
func tighter[T int | int64](k, p T) T {
	if p > 0 && p < k {
		return p
	}
	return k
}

func adapterLimitsOf(l Limits) adapterLimits {
	return adapterLimits{maxDepth: l.MaxDepth, maxFrameBytes: 6*l.MaxArgumentBytes + frameOverhead}
}

// Config configures a Kernel.
type Config struct {
	// Builtins are the built-in tools a process may enable by name (tools.Echo(), …).
	Builtins []Tool
	// Limits are the kernel-wide limits; processes can only tighten them.
	Limits Limits
	// JIT rebuilds the handlers of committed JIT bindings: on Open for every live
	// process (rehydrate) and on Fork for the bindings re-created under the new PID.
	// The JIT lifecycle in package tools implements it. Nil: Open restores no binding
	// (an embedder may reinstall them with InstallTool) and Fork refuses a checkpoint
	// that holds bindings. The kernel is the only place that rehydrates bindings.
	JIT JITLoader
	// SkipJITRestore makes Open leave the committed JIT bindings of restored
	// processes out of their tool tables, so that Open writes nothing for them (each
	// installation is recorded): for programs that only read. Fork and registration
	// still work through JIT.
	SkipJITRestore bool
	// ApprovalTimeout bounds how long a call of an operator-class tool waits for a
	// decision; a timeout denies. Zero means DefaultApprovalTimeout. Operator-class
	// syscalls wait as long as the syscall router allows.
	ApprovalTimeout time.Duration
	// Restore, when set, picks the live processes Open restores; the others stay in
	// the store until Adopt serves them. Nil restores every one. The replicated mode
	// restores none at Open: a host serves the processes whose leases it holds.
	Restore func(pid string) bool
}

// DefaultApprovalTimeout is the default of Config.ApprovalTimeout.
const DefaultApprovalTimeout = 2 * time.Minute

// Projection is how a process's tool table is shown to the model (image.Projection).
type Projection = image.Projection

// The projections.
const (
	Direct      = image.Direct
	Multiplexed = image.Multiplexed
)

// ProcessConfig configures a process at Spawn.
type ProcessConfig struct {
	// Capabilities granted to the process (handed to syscalls with each call).
	Capabilities []string
	// Projection is Direct (the default) or Multiplexed.
	Projection Projection
	// Limits tighten the kernel's limits for this process.
	Limits Limits
	// Tools are the names of the built-in tools enabled in the process's tool table.
	Tools []string
}

// Kernel is the libOS kernel on one store. It is safe for concurrent use by many
// processes; each call runs the whole pipeline.
type Kernel struct {
	st              *store.Store
	builtins        map[string]*entry
	limits          Limits
	runtime         *Runtime
	jit             JITLoader
	skipJITRestore  bool
	approvalTimeout time.Duration
	restoreOnly     func(pid string) bool

	mu      sync.RWMutex
	procs   map[string]*process
	closed  bool
	closing chan struct{}
	calls   sync.WaitGroup

	subMu  sync.Mutex
	subs   map[int]func(pid string)
	nextID int

	apprMu  sync.Mutex
	waiters map[string]*waiter // approval ID → the call waiting on it

	ownMu  sync.RWMutex
	owners map[string]string // checkpoint or approval ID → its process

	unknown  []UnknownSettlement
	failures []BindingFailure
	// expired holds, on a read-only store, the pending approvals whose deadline had
	// passed at Open, with that time: Approvals shows them expired, as a writable Open
	// would have recorded them (restoreApprovals). Written only during Open.
	expired map[string]time.Time
}

// UnknownSettlement is a tool call that reached tool_called but was never settled
// before the kernel stopped; on Open it is reported (and recorded with an
// unknown_settlement event), never retried.
type UnknownSettlement struct {
	PID    string
	CallID string
	Tool   string
	Seq    uint64 // sequence number of the tool_called event
}

// Open starts a kernel on st with the built-in tools of cfg, compiling every schema
// once. Processes already in st are restored with their tool tables, and every call
// left without settlement is recorded as unknown_settlement (see UnknownSettlements).
// The kernel does not own st: close the kernel, then the store.
//
// On a store opened read-only (store.Options.ReadOnly) Open writes nothing and
// records none of what it finds: the calls left open are reported by
// UnknownSettlements, the pending approvals past their deadline are shown expired by
// Approvals, and the restored JIT bindings are installed without their tools_changed
// events. The next writable Open records them. Every operation that writes fails
// with the store's read_only error (store.ErrReadOnly).
func Open(ctx context.Context, st *store.Store, cfg Config) (*Kernel, error) {
	if st == nil {
		return nil, errorf(CodeInvalidConfig, "open: no store")
	}
	if err := checkLimits(cfg.Limits, "open"); err != nil {
		return nil, err
	}
	k := &Kernel{
		st:             st,
		builtins:       map[string]*entry{},
		limits:         withDefaults(cfg.Limits),
		procs:          map[string]*process{},
		subs:           map[int]func(string){},
		jit:            cfg.JIT,
		skipJITRestore: cfg.SkipJITRestore,
		closing:        make(chan struct{}),
		waiters:        map[string]*waiter{},
		owners:         map[string]string{},

		approvalTimeout: cfg.ApprovalTimeout,
		restoreOnly:     cfg.Restore,
	}
	if k.approvalTimeout <= 0 {
		k.approvalTimeout = DefaultApprovalTimeout
	}
	k.runtime = &Runtime{Tools: &HostTools{k: k}}
	for _, t := range cfg.Builtins {
		if t.Kind != "" && t.Kind != KindBuiltin {
			return nil, toolErr(t.Name, "a built-in tool must have kind %q", KindBuiltin)
		}
		if _, dup := k.builtins[t.Name]; dup {
			return nil, toolErr(t.Name, "two built-in tools have this name")
		}
		e, err := compileTool(t, k.limits.MaxDepth)
		if err != nil {
			return nil, err
		}
		k.builtins[t.Name] = e
	}
	if err := k.rehydrate(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// UnknownSettlements returns the calls Open found unsettled and recorded as
// unknown_settlement. Their effects are unknown; they were not retried.
func (k *Kernel) UnknownSettlements() []UnknownSettlement {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return slices.Clone(k.unknown)
}

// Close stops accepting calls and waits for the calls in flight. It does not close
// the store.
func (k *Kernel) Close() error {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.closing) // calls waiting for an approval stop; the approval stays pending
	}
	k.mu.Unlock()
	k.calls.Wait()
	return nil
}

// Runtime is the host API of the kernel (runtime.* in the project's Skills).
func (k *Kernel) Runtime() *Runtime { return k.runtime }

func storageErr(what string, err error) *Error {
	return liberr.WrapQuoting(layer, CodeStorage, err, what)
}

// newID makes the kernel's IDs (processes, calls, approvals, checkpoints).
var newID = randid.New

// newCallID makes a call's ID. Call IDs grow with time, so that the store proves a new
// call's open marker and result absent by comparing its ID with the largest it holds,
// without a read under its write lock (store's call-ID ceiling).
func newCallID() string { return randid.Ordered("call_") }

// enter registers a call in flight, refusing it when the kernel is closed.
func (k *Kernel) enter() error {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return errorf(CodeClosed, "the kernel is closed")
	}
	k.calls.Add(1)
	return nil
}

// enterProcess is enter, then process(pid): the prologue of every operation on one
// process. The call is in flight (the caller defers k.calls.Done()) only when it
// returns no error.
func (k *Kernel) enterProcess(pid string) (*process, error) {
	if err := k.enter(); err != nil {
		return nil, err
	}
	p, err := k.process(pid)
	if err != nil {
		k.calls.Done()
		return nil, err
	}
	return p, nil
}

func (k *Kernel) process(pid string) (*process, error) {
	k.mu.RLock()
	p := k.procs[pid]
	k.mu.RUnlock()
	if p == nil {
		return nil, errorf(CodeUnknownProcess, "no process %q", pid)
	}
	return p, nil
}

// Tools returns the projected tool list of pid, as the model sees it, sorted by name:
// in direct mode every tool that passes the visibility gate and the Skill gate; in
// multiplexed mode the non-JIT tools among them plus run_jit_tool.
func (k *Kernel) Tools(pid string) ([]render.Tool, error) {
	p, err := k.process(pid)
	if err != nil {
		return nil, err
	}
	p.mu.RLock()
	proj := p.projection
	var defs []render.Tool
	for name, e := range p.tools {
		if p.allowed != nil && !p.allowed[name] {
			continue
		}
		if e.Kind == KindJIT && proj == Multiplexed {
			continue
		}
		if ok, _ := p.skillAllows(e); !ok {
			continue
		}
		defs = append(defs, e.def())
	}
	p.mu.RUnlock()
	if proj == Multiplexed {
		defs = append(defs, runJITToolDef)
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs, nil
}

func (e *entry) def() render.Tool {
	return render.Tool{Name: e.Name, Description: e.Description, InputSchema: e.inSchema, OutputSchema: e.outSchema, Annotations: e.Annotations, Strict: e.strict}
}

// OnToolsChanged subscribes fn to changes of a process's projected tool list (a JIT
// tool installed or removed, the visibility gate changed). fn runs synchronously after
// the change is durable and must return quickly. The returned func unsubscribes.
func (k *Kernel) OnToolsChanged(fn func(pid string)) (unsubscribe func()) {
	k.subMu.Lock()
	id := k.nextID
	k.nextID++
	k.subs[id] = fn
	k.subMu.Unlock()
	return func() {
		k.subMu.Lock()
		delete(k.subs, id)
		k.subMu.Unlock()
	}
}

func (k *Kernel) notify(pid string) {
	k.subMu.Lock()
	fns := make([]func(string), 0, len(k.subs))
	for _, fn := range k.subs {
		fns = append(fns, fn)
	}
	k.subMu.Unlock()
	for _, fn := range fns {
		fn(pid)
	}
}

// InstallTool installs a JIT tool in pid's tool table, atomically with persist (the
// durable binding the JIT lifecycle writes, may be nil) and a tools_changed event: the
// entry appears only if the batch committed, and the batch commits only if the name
// is free. A name already in the table (built-in or JIT) is a tool_conflict.
// Subscribers of OnToolsChanged are told after the commit.
func (k *Kernel) InstallTool(ctx context.Context, pid string, t Tool, persist func(tx *store.Tx) error) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	if t.Kind != KindJIT {
		return toolErr(t.Name, "InstallTool installs JIT tools only (kind %q)", KindJIT)
	}
	e, err := compileTool(t, p.limits.MaxDepth)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(map[string]any{"change": "installed", "tool": t.Name, "kind": KindJIT, "tool_id": t.ID})
	p.mu.Lock()
	if taken := p.foldedName(t.Name); taken != "" {
		p.mu.Unlock()
		e := errorf(CodeToolConflict, "process %s already has a tool named %q", pid, taken)
		if taken != t.Name {
			e = errorf(CodeToolConflict, "process %s already has a tool named %q, the same name as %q under case folding", pid, taken, t.Name)
		}
		return e
	}
	err = k.writeToolChange(ctx, pid, persist, data)
	if err == nil {
		p.tools[t.Name] = e
	}
	p.mu.Unlock()
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return liberr.WrapQuoting(layer, CodeToolConflict, err, "install "+t.Name)
		}
		return storageErr("install "+t.Name, err)
	}
	k.notify(pid)
	return nil
}

// writeToolChange writes persist (may be nil) and a tools_changed event with data in
// one batch: the change to a tool table and its durable reason commit together.
func (k *Kernel) writeToolChange(ctx context.Context, pid string, persist func(tx *store.Tx) error, data []byte) error {
	return k.st.Update(ctx, func(tx *store.Tx) error {
		if persist != nil {
			if err := persist(tx); err != nil {
				return err
			}
		}
		_, err := tx.Append(pid, EventToolsChanged, data)
		return err
	})
}

// RemoveTool removes JIT tool name from pid's tool table, atomically with persist and
// a tools_changed event. Built-in tools cannot be removed.
func (k *Kernel) RemoveTool(ctx context.Context, pid, name string, persist func(tx *store.Tx) error) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	data, _ := json.Marshal(map[string]any{"change": "removed", "tool": name, "kind": KindJIT})
	p.mu.Lock()
	e, ok := p.tools[name]
	if !ok || e.Kind != KindJIT {
		p.mu.Unlock()
		return &Error{Layer: layer, Code: CodeToolConflict, Message: fmt.Sprintf("process %s has no JIT tool named %q", pid, name)}
	}
	err = k.writeToolChange(ctx, pid, persist, data)
	if err == nil {
		delete(p.tools, name)
	}
	p.mu.Unlock()
	if err != nil {
		return storageErr("remove "+name, err)
	}
	k.notify(pid)
	return nil
}

// SetToolGate sets the visibility gate of pid: only the named tools pass it (an
// active Skill's allowed-tools), nil lets every tool in the table pass. Tools outside
// the gate disappear from the projected list, and a call to one is refused with
// tool_not_allowed before it reaches tool_called. The change is recorded as a
// tools_changed event and kept in the process record.
func (k *Kernel) SetToolGate(ctx context.Context, pid string, allowed []string) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	var set map[string]bool
	if allowed != nil {
		set = map[string]bool{}
		for _, n := range allowed {
			if n == RunJITTool {
				return errorf(CodeInvalidConfig, "%s is not a process tool and cannot be allowed", RunJITTool)
			}
			set[n] = true
		}
	}
	names := slices.Clone(allowed)
	sort.Strings(names)
	data, _ := json.Marshal(map[string]any{"change": "gate", "allowed": names})
	p.mu.Lock()
	old := p.allowed
	p.allowed = set
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		if err := k.putProcess(tx, p); err != nil {
			return err
		}
		_, err := tx.Append(pid, EventToolsChanged, data)
		return err
	})
	if err != nil {
		p.allowed = old
	}
	p.mu.Unlock()
	if err != nil {
		return storageErr("set tool gate", err)
	}
	k.notify(pid)
	return nil
}
