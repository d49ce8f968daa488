package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// Process states, as kept in the store and shown by ProcessInfo.
const (
	// StateRunning: the process takes calls.
	StateRunning = "running"
	// StatePaused: the process is live but refuses calls (process_paused) until the
	// operator resumes it. A paused process stays paused across a reopen.
	StatePaused = "paused"
	// StateKilled: the process is gone; its record, log, candidates and checkpoints
	// stay for inspection, and its checkpoints can still be forked.
	StateKilled = "killed"
)

// Events of a process's lifecycle, each written in the same batch as the change.
const (
	EventCapabilityGranted = "capability_granted"
	EventCapabilityRevoked = "capability_revoked"
	EventProjectionChanged = "projection_changed"
	EventProcessPaused     = "process_paused"
	EventProcessResumed    = "process_resumed"
	EventProcessKilled     = "process_killed"
	EventSkillActivated    = "skill_activated"
	EventSkillDeactivated  = "skill_deactivated"
)

type process struct {
	pid    string
	img    *image.Image // never changed after spawn
	limits Limits
	// caps is the live capability set: syscalls.Caller.Capabilities is this very set,
	// so a revocation stops the next syscall of a call already running.
	caps *syscalls.CapSet
	// policy is the image's route policy, compiled once: egress, secrets, labels.
	policy *syscalls.Policy
	// auth is what every call's syscall authority shares (process.authority).
	auth               syscalls.Caller
	parent, checkpoint string
	created            time.Time

	mu         sync.RWMutex
	projection Projection
	state      string
	tools      map[string]*entry
	allowed    map[string]bool // operator's visibility gate; nil lets every tool pass
	active     []string        // active Skills, in activation order
	granting   string          // a capability being granted: in the record, not yet held
}

// procRecord is the engine's part of the process record (store.Process.Image).
type procRecord struct {
	Image  *image.Image `json:"image,omitempty"`
	Active []string     `json:"active_skills,omitempty"`
	Gate   []string     `json:"gate,omitempty"`
	Gated  bool         `json:"gated,omitempty"`
	// Tools is the only field of records written before images existed.
	Tools []string `json:"tools,omitempty"`
}

func (k *Kernel) newProcess(pid string, img *image.Image, caps []string) (*process, error) {
	if img.Projection == "" {
		img.Projection = Direct
	}
	if img.Projection != Direct && img.Projection != Multiplexed {
		return nil, errorf(CodeInvalidConfig, "spawn: unknown projection %q (want direct or multiplexed)", img.Projection)
	}
	if err := checkLimits(img.Limits.Limits, "spawn"); err != nil {
		return nil, err
	}
	policy, probs := syscalls.CompilePolicy(img.Policy())
	if probs != nil {
		return nil, errorf(CodeInvalidConfig, "spawn: %s: %s", probs[0].At, probs[0].Message)
	}
	p := &process{
		pid: pid, img: img, limits: tighten(k.limits, img.Limits.Limits), caps: syscalls.NewCapSet(),
		policy: policy, projection: img.Projection, state: StateRunning, tools: map[string]*entry{},
	}
	for _, c := range caps {
		p.caps.Grant(syscalls.Capability(c))
	}
	p.auth = p.authority()
	for _, name := range img.Tools {
		if name == RunJITTool {
			return nil, errorf(CodeInvalidConfig, "spawn: %s is not a process tool and cannot be enabled", RunJITTool)
		}
		e, ok := k.builtins[name]
		if !ok {
			return nil, errorf(CodeInvalidConfig, "spawn: no built-in tool %q", name)
		}
		if _, dup := p.tools[name]; dup {
			return nil, errorf(CodeInvalidConfig, "spawn: tool %q enabled twice", name)
		}
		p.tools[name] = e
	}
	return p, nil
}

// capStrings returns the held capabilities, sorted.
func (p *process) capStrings() []string {
	return slices.Clone(p.caps.Strings())
}

// putProcess writes p's record as it is now. Call with p.mu held.
func (k *Kernel) putProcess(tx *store.Tx, p *process) error {
	rec := procRecord{Image: p.img, Active: p.active}
	if p.allowed != nil {
		rec.Gated = true
		rec.Gate = slices.Sorted(maps.Keys(p.allowed))
	}
	img, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	lim, _ := json.Marshal(p.img.Limits.Limits)
	caps := p.capStrings()
	if p.granting != "" && !slices.Contains(caps, p.granting) {
		caps = append(caps, p.granting)
		sort.Strings(caps)
	}
	return tx.PutProcess(store.Process{
		PID: p.pid, Image: img, Capabilities: caps, Projection: string(p.projection),
		Limits: lim, State: p.state, Parent: p.parent, Checkpoint: p.checkpoint,
	})
}

// Spawn creates a process from cfg (an anonymous image) and returns its PID. See
// SpawnImage.
func (k *Kernel) Spawn(ctx context.Context, cfg ProcessConfig) (string, error) {
	return k.spawn(ctx, imageOf(cfg))
}

// SpawnImage creates a process from img with the image's tools, capabilities,
// projection, limits, budgets, approval policy and Skills, and returns its PID
// (pid_ + 128 random bits, hex). Every tool of the image must be a built-in of this
// kernel. The process record and a process_spawned event (with the image's name,
// version and digest) are durable when SpawnImage returns.
func (k *Kernel) SpawnImage(ctx context.Context, img *image.Image) (string, error) {
	if err := k.checkImage(img); err != nil {
		return "", err
	}
	return k.spawn(ctx, img.Clone())
}

func (k *Kernel) spawn(ctx context.Context, img *image.Image) (string, error) {
	if err := k.enter(); err != nil {
		return "", err
	}
	defer k.calls.Done()
	p, err := k.newProcess(newID("pid_"), img, img.Capabilities)
	if err != nil {
		return "", err
	}
	caps := p.capStrings()
	tools := img.Tools
	if tools == nil {
		tools = []string{}
	}
	ev, _ := json.Marshal(map[string]any{
		"projection": p.projection, "tools": tools, "capabilities": caps, "limits": p.limits,
		"image": img.Name, "image_version": img.Version, "image_sha256": img.Digest(),
	})
	p.mu.Lock()
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		p.created = tx.Now()
		if err := k.putProcess(tx, p); err != nil {
			return err
		}
		_, err := tx.Append(p.pid, EventProcessSpawned, ev)
		return err
	})
	p.mu.Unlock()
	if err != nil {
		return "", storageErr("spawn", err)
	}
	k.mu.Lock()
	k.procs[p.pid] = p
	k.mu.Unlock()
	return p.pid, nil
}

// restore rebuilds a live process from its record.
func (k *Kernel) restore(rec store.Process) (*process, error) {
	var pr procRecord
	if len(rec.Image) > 0 {
		if err := json.Unmarshal(rec.Image, &pr); err != nil {
			return nil, storageErr("open: process "+rec.PID, err)
		}
	}
	img := pr.Image
	if img == nil {
		var lim Limits
		if len(rec.Limits) > 0 {
			if err := json.Unmarshal(rec.Limits, &lim); err != nil {
				return nil, storageErr("open: process "+rec.PID, err)
			}
		}
		img = imageOf(ProcessConfig{Capabilities: rec.Capabilities, Limits: lim, Tools: pr.Tools})
	}
	img.Projection = Projection(rec.Projection)
	p, err := k.newProcess(rec.PID, img, rec.Capabilities)
	if err != nil {
		return nil, fmt.Errorf("engine: open: restore process %s: %w", rec.PID, err)
	}
	p.state, p.parent, p.checkpoint, p.created = rec.State, rec.Parent, rec.Checkpoint, rec.Created
	p.active = pr.Active
	if pr.Gated {
		p.allowed = map[string]bool{}
		for _, n := range pr.Gate {
			p.allowed[n] = true
		}
	}
	return p, nil
}

// rehydrate restores every live process (those Config.Restore accepts), its committed
// JIT bindings, its approvals, and reports the calls left open.
func (k *Kernel) rehydrate(ctx context.Context) error {
	recs, err := k.st.Processes()
	if err != nil {
		return storageErr("open: list processes", err)
	}
	for _, rec := range recs {
		if err := k.indexOwners(rec.PID); err != nil {
			return err
		}
		if rec.State != StateRunning && rec.State != StatePaused {
			continue
		}
		if k.restoreOnly != nil && !k.restoreOnly(rec.PID) {
			continue
		}
		if err := k.rehydrateOne(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

// rehydrateOne restores one live process: its tool table with its committed JIT
// bindings, its approvals, and an unknown_settlement event for every call left open.
func (k *Kernel) rehydrateOne(ctx context.Context, rec store.Process) error {
	p, err := k.restore(rec)
	if err != nil {
		return err
	}
	if err := k.restoreBindings(ctx, p); err != nil {
		return err
	}
	if err := k.restoreApprovals(ctx, p); err != nil {
		return err
	}
	open, err := k.st.Unsettled(rec.PID)
	if err != nil {
		return storageErr("open: unsettled calls of "+rec.PID, err)
	}
	var unknown []UnknownSettlement
	for _, ev := range open {
		var called struct {
			Tool string `json:"tool"`
		}
		_ = json.Unmarshal(ev.Data, &called)
		data, _ := json.Marshal(map[string]any{
			"call_id": ev.CallID, "tool": called.Tool, "called_seq": ev.Seq,
			"reason": "the call was not settled before the kernel stopped; it may or may not have had effects and is not retried",
		})
		// A read-only store reports the call and leaves its record to the next writer.
		if !k.st.ReadOnly() {
			if _, err := k.st.Append(ctx, rec.PID, store.EventUnknownSettlement, data); err != nil {
				return storageErr("open: record unknown settlement", err)
			}
		}
		unknown = append(unknown, UnknownSettlement{PID: rec.PID, CallID: ev.CallID, Tool: called.Tool, Seq: ev.Seq})
	}
	k.mu.Lock()
	k.procs[p.pid] = p
	k.unknown = append(k.unknown, unknown...)
	k.mu.Unlock()
	return nil
}

// Adopt starts serving process pid from the store, as Open restores a process: its
// tool table with its committed JIT bindings (recorded as rehydrated), its approvals,
// and every call it left open reported as unknown settlement (recorded, added to
// UnknownSettlements, never retried). In the replicated mode a host adopts a process
// whose lease it took over. A process already served is left as it is; a killed or
// unknown one is unknown_process.
func (k *Kernel) Adopt(ctx context.Context, pid string) error {
	if err := k.enter(); err != nil {
		return err
	}
	defer k.calls.Done()
	if _, err := k.process(pid); err == nil {
		return nil
	}
	rec, err := k.st.Process(pid)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeUnknownProcess, "no process %q", pid)
	}
	if err != nil {
		return storageErr("adopt "+pid, err)
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return errorf(CodeUnknownProcess, "process %q is %s", pid, rec.State)
	}
	if err := k.indexOwners(pid); err != nil {
		return err
	}
	return k.rehydrateOne(ctx, rec)
}

// Release stops serving process pid on this kernel: it leaves the process table (a
// call to it is unknown_process) while its record and log stay in the store. Calls in
// flight finish; their writes are refused by the store's replicator when this host no
// longer holds the process's lease.
func (k *Kernel) Release(pid string) {
	k.mu.Lock()
	delete(k.procs, pid)
	k.mu.Unlock()
}

// change applies an operator change to p under its lock: mutate changes the
// in-memory state (and may refuse), the record and the event are written in one
// batch, and undo restores the state when the batch fails.
func (k *Kernel) change(ctx context.Context, pid, what, typ string, data map[string]any, mutate func(p *process) (undo func(), err error)) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	if data == nil {
		data = map[string]any{}
	}
	if _, ok := data["by"]; !ok {
		data["by"] = "operator"
	}
	raw, _ := json.Marshal(data)
	p.mu.Lock()
	undo, err := mutate(p)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		if err := k.putProcess(tx, p); err != nil {
			return err
		}
		_, err := tx.Append(pid, typ, raw)
		return err
	})
	if err != nil && undo != nil {
		undo()
	}
	p.mu.Unlock()
	if err != nil {
		return storageErr(what, err)
	}
	return nil
}

// knownCapability refuses a capability no route requires: capabilities are exact
// strings, and a typo would silently grant nothing.
func knownCapability(c string) error {
	for _, r := range syscalls.Routes() {
		if string(r.Capability) == c {
			return nil
		}
	}
	return errorf(CodeInvalidConfig, "no syscall route requires capability %q (capabilities are exact strings)", c)
}

// Grant gives pid capability c. It is durable (process record and a
// capability_granted event in one batch) before the process can use it.
func (k *Kernel) Grant(ctx context.Context, pid, c string) error {
	if err := knownCapability(c); err != nil {
		return err
	}
	var p *process
	err := k.change(ctx, pid, "grant "+c, EventCapabilityGranted, map[string]any{"capability": c}, func(q *process) (func(), error) {
		p = q
		q.granting = c
		return nil, nil
	})
	if p != nil {
		p.mu.Lock()
		if err == nil {
			p.caps.Grant(syscalls.Capability(c))
		}
		p.granting = ""
		p.mu.Unlock()
	}
	return err
}

// Revoke takes capability c from pid. It takes effect at once, before it is durable:
// the very next capability check of every call of pid, including calls already
// running, refuses it. The process record and a capability_revoked event follow in
// one batch; if they cannot be written the capability stays revoked in memory and the
// error is returned (the durable record still holds it until the next change).
func (k *Kernel) Revoke(ctx context.Context, pid, c string) error {
	p, err := k.process(pid)
	if err != nil {
		return err
	}
	held := p.caps.Has(syscalls.Capability(c))
	p.caps.Revoke(syscalls.Capability(c))
	return k.change(ctx, pid, "revoke "+c, EventCapabilityRevoked, map[string]any{"capability": c, "was_held": held}, func(p *process) (func(), error) {
		return nil, nil
	})
}

// SetProjection switches pid between the direct and the multiplexed projection. The
// change is durable and recorded; subscribers of OnToolsChanged are told.
func (k *Kernel) SetProjection(ctx context.Context, pid string, proj Projection) error {
	if proj != Direct && proj != Multiplexed {
		return errorf(CodeInvalidConfig, "unknown projection %q (want direct or multiplexed)", proj)
	}
	err := k.change(ctx, pid, "set projection", EventProjectionChanged, map[string]any{"projection": proj}, func(p *process) (func(), error) {
		old := p.projection
		p.projection = proj
		return func() { p.projection = old }, nil
	})
	if err == nil {
		k.notify(pid)
	}
	return err
}

// Pause makes pid refuse every call (process_paused, recorded as call_rejected)
// until Resume. Calls already running finish.
func (k *Kernel) Pause(ctx context.Context, pid string) error {
	return k.setState(ctx, pid, StatePaused, EventProcessPaused)
}

// Resume lets a paused pid take calls again.
func (k *Kernel) Resume(ctx context.Context, pid string) error {
	return k.setState(ctx, pid, StateRunning, EventProcessResumed)
}

func (k *Kernel) setState(ctx context.Context, pid, state, typ string) error {
	return k.change(ctx, pid, state, typ, map[string]any{"state": state}, func(p *process) (func(), error) {
		old := p.state
		if old == state {
			return nil, errorf(CodeInvalidState, "process %s is already %s", pid, state)
		}
		p.state = state
		return func() { p.state = old }, nil
	})
}

// Kill ends pid: it leaves the live table (later calls get unknown_process), its
// pending approvals are denied, and its record is kept with state killed, with its
// log, candidates and checkpoints. Calls already running finish and settle. The
// killed record, the process_killed event and every denial are one batch: when Kill
// returns nil no approval of pid is left pending, and when the batch cannot be
// written Kill returns the error and the process runs on, unchanged.
func (k *Kernel) Kill(ctx context.Context, pid string) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	raw, _ := json.Marshal(map[string]any{"state": StateKilled, "by": "operator"})
	var denied []string
	p.mu.Lock()
	old := p.state
	p.state = StateKilled
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		if err := k.putProcess(tx, p); err != nil {
			return err
		}
		if _, err := tx.Append(pid, EventProcessKilled, raw); err != nil {
			return err
		}
		ids, err := denyPending(tx, pid, "the process was killed")
		denied = ids
		return err
	})
	if err != nil {
		p.state = old
	}
	p.mu.Unlock()
	if err != nil {
		return storageErr("kill "+pid, err)
	}
	k.mu.Lock()
	delete(k.procs, pid)
	k.mu.Unlock()
	for _, id := range denied {
		k.wake(id)
	}
	k.notify(pid)
	return nil
}

// ProcessInfo describes a process.
type ProcessInfo struct {
	PID          string
	State        string // running, paused or killed
	Image        string // image name
	ImageVersion string
	ImageDigest  string
	Projection   Projection
	Capabilities []string
	// Limits are the effective limits (the kernel's, tightened by the process's).
	Limits Limits
	// Tools maps each name in the process tool table to its kind (empty for a killed
	// process).
	Tools map[string]ToolKind
	// Skills are the Skills the image ships; ActiveSkills those activated, in order.
	Skills       []string
	ActiveSkills []string
	// Parent and Checkpoint name what a fork was made from.
	Parent     string
	Checkpoint string
	Created    time.Time
}

// Process describes live process pid.
func (k *Kernel) Process(pid string) (ProcessInfo, error) {
	p, err := k.process(pid)
	if err != nil {
		return ProcessInfo{}, err
	}
	return p.info(), nil
}

func (p *process) info() ProcessInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	info := ProcessInfo{
		PID: p.pid, State: p.state, Image: p.img.Name, ImageVersion: p.img.Version, ImageDigest: p.img.Digest(),
		Projection: p.projection, Capabilities: p.capStrings(), Limits: p.limits, Tools: map[string]ToolKind{},
		ActiveSkills: slices.Clone(p.active), Parent: p.parent, Checkpoint: p.checkpoint, Created: p.created,
	}
	for _, s := range p.img.Skills {
		info.Skills = append(info.Skills, s.Name)
	}
	for n, e := range p.tools {
		info.Tools[n] = e.Kind
	}
	return info
}

// ListProcesses lists every process in the store, killed ones included, ordered by
// PID. Live processes are described from the kernel, killed ones from their record.
func (k *Kernel) ListProcesses() ([]ProcessInfo, error) {
	recs, err := k.st.Processes()
	if err != nil {
		return nil, storageErr("list processes", err)
	}
	out := make([]ProcessInfo, 0, len(recs))
	for _, rec := range recs {
		if p, err := k.process(rec.PID); err == nil {
			info := p.info()
			info.Created = rec.Created
			out = append(out, info)
			continue
		}
		info := ProcessInfo{PID: rec.PID, State: rec.State, Projection: Projection(rec.Projection),
			Capabilities: rec.Capabilities, Parent: rec.Parent, Checkpoint: rec.Checkpoint, Created: rec.Created}
		var pr procRecord
		if json.Unmarshal(rec.Image, &pr) == nil && pr.Image != nil {
			info.Image, info.ImageVersion, info.ImageDigest = pr.Image.Name, pr.Image.Version, pr.Image.Digest()
			info.ActiveSkills = pr.Active
			for _, s := range pr.Image.Skills {
				info.Skills = append(info.Skills, s.Name)
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// skillAllows is the Skill gate: with no Skill active every tool passes; otherwise
// only the image's base tools, the Skill tool, the active Skills' allowed-tools and —
// when an active Skill allows register_jit_tool — the process's JIT tools. Call with
// p.mu held (read).
func (p *process) skillAllows(e *entry) (bool, string) {
	if p.img.SkillGate != image.SkillGateStrict || len(p.active) == 0 || e.Name == SkillToolName ||
		e.Name == DeactivateSkillToolName || slices.Contains(p.img.BaseTools, e.Name) {
		return true, ""
	}
	for _, name := range p.active {
		s, _ := p.img.Skill(name)
		if slices.Contains(s.AllowedTools, e.Name) {
			return true, ""
		}
		if e.Kind == KindJIT && slices.Contains(s.AllowedTools, jitRegistrar) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s is not allowed while the Skills %s are active: only the image's base tools and their allowed-tools can be called",
		e.Name, strings.Join(p.active, ", "))
}

// indexOwners remembers which process each checkpoint and approval of pid belongs to.
func (k *Kernel) indexOwners(pid string) error {
	cs, err := k.st.Checkpoints(pid)
	if err != nil {
		return storageErr("open: checkpoints of "+pid, err)
	}
	as, err := k.st.Approvals(pid)
	if err != nil {
		return storageErr("open: approvals of "+pid, err)
	}
	for _, c := range cs {
		k.setOwner(c.ID, pid)
	}
	for _, a := range as {
		k.setOwner(a.ID, pid)
	}
	return nil
}

func (k *Kernel) setOwner(id, pid string) {
	k.ownMu.Lock()
	k.owners[id] = pid
	k.ownMu.Unlock()
}

func (k *Kernel) owner(id string) (string, bool) {
	k.ownMu.RLock()
	defer k.ownMu.RUnlock()
	pid, ok := k.owners[id]
	return pid, ok
}

// foldedName returns the name of a tool of p that is name under Unicode case folding, or
// "". The caller holds p.mu.
func (p *process) foldedName(name string) string {
	if _, ok := p.tools[name]; ok {
		return name
	}
	found := ""
	for n := range p.tools {
		if SameToolName(n, name) && (found == "" || n < found) {
			found = n
		}
	}
	return found
}

// imageOf is the anonymous image of a ProcessConfig spawn.
func imageOf(cfg ProcessConfig) *image.Image {
	return &image.Image{
		Format: image.ImageFormat, Name: "process-config", Version: "0.0.0",
		Tools: slices.Clone(cfg.Tools), Capabilities: slices.Clone(cfg.Capabilities),
		Projection: cfg.Projection, Limits: image.ImageLimits{Limits: cfg.Limits},
	}
}

// checkImage makes the checks that need the kernel: every tool is a built-in.
func (k *Kernel) checkImage(img *image.Image) error {
	if img == nil {
		return errorf(CodeInvalidImage, "spawn: no image")
	}
	var ps image.Problems
	if img.Format != image.ImageFormat {
		ps.Add("/format", "format %q is not %q", img.Format, image.ImageFormat)
	}
	for i, t := range img.Tools {
		if _, ok := k.builtins[t]; !ok && t != RunJITTool {
			ps.Add("/tools/"+strconv.Itoa(i), "this kernel has no built-in tool %q", t)
		}
	}
	// An image made in Go gets the same policy checks as a manifest.
	_, probs := syscalls.CompilePolicy(img.Policy())
	for _, p := range probs {
		ps.Add(p.At, "%s", p.Message)
	}
	for i, t := range img.ExternalTools {
		if !slices.Contains(img.Tools, t) {
			ps.Add("/external_tools/"+strconv.Itoa(i), "tool %q is not among the image's tools", t)
		}
	}
	return ps.Err(CodeInvalidImage, fmt.Sprintf("image %s@%s", img.Name, img.Version))
}
