package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Events of checkpoints, forks and binding changes made by the kernel.
const (
	EventCheckpointCreated = "checkpoint_created"
	EventProcessForked     = "process_forked"    // in the new process's log
	EventCheckpointForked  = "checkpoint_forked" // in the log of the checkpoint's process
	// EventJITRevoked: the operator removed a JIT binding (the model has no unregister).
	EventJITRevoked = "jit_revoked"
)

// JITLoader rebuilds the process tool of a committed JIT binding: its contract and
// its program, compiled, behind a ready handler. The JIT lifecycle in package tools
// implements it; the kernel calls it on Open for the bindings of every live process
// (rehydrate) and on Fork for the bindings it re-creates under the new PID.
type JITLoader interface {
	// LoadJIT returns the tool of binding b of process b.PID: Name b.Name, ID
	// b.ToolID, Kind KindJIT, with the contract and program of candidate
	// b.CandidateID, which is owned by b.CandidatePID (by b.PID when that is empty).
	// It must not write to the store: the kernel records the installation.
	LoadJIT(ctx context.Context, b store.Binding) (Tool, error)
}

// BindingFailure is a committed binding Open could not install again (its program no
// longer compiles, its name is now a built-in, …). The binding stays in the store.
type BindingFailure struct {
	PID    string
	Name   string
	ToolID string
	Err    error
}

// BindingFailures returns the bindings Open could not restore.
func (k *Kernel) BindingFailures() []BindingFailure {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return slices.Clone(k.failures)
}

func (k *Kernel) bindingFailed(f BindingFailure) {
	k.mu.Lock()
	k.failures = append(k.failures, f)
	k.mu.Unlock()
}

// loadJIT asks the loader for b's tool and checks that it is exactly b's.
func (k *Kernel) loadJIT(ctx context.Context, b store.Binding, maxDepth int) (*entry, error) {
	t, err := k.jit.LoadJIT(ctx, b)
	if err != nil {
		return nil, err
	}
	if t.Name != b.Name || t.ID != b.ToolID || t.Kind != KindJIT {
		return nil, toolErr(b.Name, "the JIT loader returned %q (%s, id %s) for binding %s (id %s)", t.Name, t.Kind, t.ID, b.Name, b.ToolID)
	}
	return compileTool(t, maxDepth)
}

// restoreBindings installs p's committed JIT bindings again, exactly: same names,
// tool IDs and schemas. Each installation is recorded (tools_changed, change
// "rehydrated"), except on a read-only store; a binding that cannot be installed is
// reported in BindingFailures.
func (k *Kernel) restoreBindings(ctx context.Context, p *process) error {
	if k.jit == nil || k.skipJITRestore {
		return nil
	}
	bs, err := k.st.Bindings(p.pid)
	if err != nil {
		return storageErr("open: bindings of "+p.pid, err)
	}
	var events []json.RawMessage
	for _, b := range bs {
		if _, taken := p.tools[b.Name]; taken {
			k.bindingFailed(BindingFailure{PID: p.pid, Name: b.Name, ToolID: b.ToolID,
				Err: toolErr(b.Name, "the name is now a built-in tool of the process")})
			continue
		}
		e, err := k.loadJIT(ctx, b, p.limits.MaxDepth)
		if err != nil {
			k.bindingFailed(BindingFailure{PID: p.pid, Name: b.Name, ToolID: b.ToolID, Err: err})
			continue
		}
		p.tools[b.Name] = e
		data, _ := json.Marshal(map[string]any{"change": "rehydrated", "tool": b.Name, "kind": KindJIT, "tool_id": b.ToolID, "candidate_id": b.CandidateID})
		events = append(events, data)
	}
	if len(events) == 0 || k.st.ReadOnly() {
		return nil // a read-only store installs them without a record
	}
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		for _, d := range events {
			if _, err := tx.Append(p.pid, EventToolsChanged, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storageErr("open: record rehydrated bindings of "+p.pid, err)
	}
	return nil
}

// snapshot is a checkpoint's engine-defined content.
type snapshot struct {
	Version      int             `json:"version"`
	Image        *image.Image    `json:"image"`
	Capabilities []string        `json:"capabilities"`
	Projection   Projection      `json:"projection"`
	ActiveSkills []string        `json:"active_skills,omitempty"`
	Gated        bool            `json:"gated,omitempty"`
	Gate         []string        `json:"gate,omitempty"`
	KV           []store.KVEntry `json:"kv"`
	Bindings     []snapBinding   `json:"bindings"`
	Budgets      []snapBudget    `json:"budgets,omitempty"`
}

type snapBinding struct {
	Name         string `json:"name"`
	ToolID       string `json:"tool_id"`
	CandidateID  string `json:"candidate_id"`
	CandidatePID string `json:"candidate_pid"`
	Scope        string `json:"scope"`
}

type snapBudget struct {
	Name string `json:"name"`
	Used int64  `json:"used"`
}

// Checkpoint records a durable snapshot of pid: its image, capabilities,
// projection, active Skills, key/value space, JIT bindings and budget counters, at
// the current end of its event log. It returns the checkpoint ID (ckpt_ + 128 random
// bits). The snapshot and a checkpoint_created event are one batch.
func (k *Kernel) Checkpoint(ctx context.Context, pid string) (string, error) {
	p, err := k.enterProcess(pid)
	if err != nil {
		return "", err
	}
	defer k.calls.Done()
	id := newID("ckpt_")
	p.mu.RLock()
	defer p.mu.RUnlock()
	snap := snapshot{Version: 1, Image: p.img, Capabilities: p.capStrings(), Projection: p.projection, ActiveSkills: p.active}
	if p.allowed != nil {
		snap.Gated, snap.Gate = true, slices.Sorted(maps.Keys(p.allowed))
	}
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		snap.KV = []store.KVEntry{}
		cursor := ""
		for {
			page, next, err := tx.KVList(pid, "", cursor, 0)
			if err != nil {
				return err
			}
			for i := range page {
				// Labels travel with the values: a fork must not launder labelled data.
				if page[i].Labels, err = tx.KVLabels(pid, page[i].Key); err != nil {
					return err
				}
			}
			snap.KV = append(snap.KV, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		bs, err := tx.Bindings(pid)
		if err != nil {
			return err
		}
		snap.Bindings = []snapBinding{}
		for _, b := range bs {
			owner := b.CandidatePID
			if owner == "" {
				owner = b.PID
			}
			snap.Bindings = append(snap.Bindings, snapBinding{Name: b.Name, ToolID: b.ToolID, CandidateID: b.CandidateID, CandidatePID: owner, Scope: b.Scope})
		}
		budgets, err := tx.Budgets(pid)
		if err != nil {
			return err
		}
		for _, b := range budgets {
			snap.Budgets = append(snap.Budgets, snapBudget{Name: b.Name, Used: b.Used})
		}
		head, err := tx.Head(pid)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(snap)
		if err != nil {
			return err
		}
		if err := tx.AddCheckpoint(store.Checkpoint{ID: id, PID: pid, EventSeq: head.Seq, Snapshot: raw}); err != nil {
			return err
		}
		data, _ := json.Marshal(map[string]any{"checkpoint_id": id, "by": "operator", "event_seq": head.Seq, "kv_entries": len(snap.KV),
			"bindings": len(snap.Bindings), "capabilities": snap.Capabilities})
		_, err = tx.Append(pid, EventCheckpointCreated, data)
		return err
	})
	if err != nil {
		return "", storageErr("checkpoint "+pid, err)
	}
	k.setOwner(id, pid)
	return id, nil
}

// findCheckpoint returns checkpoint id and the process it belongs to.
func (k *Kernel) findCheckpoint(id string) (store.Checkpoint, error) {
	notFound := errorf(CodeNotFound, "no checkpoint %q", liberr.Clip(id, 80))
	if !strings.HasPrefix(id, "ckpt_") || len(id) != len("ckpt_")+32 {
		return store.Checkpoint{}, notFound
	}
	pid, ok := k.owner(id)
	if !ok {
		return store.Checkpoint{}, notFound
	}
	c, err := k.st.Checkpoint(pid, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Checkpoint{}, notFound
	}
	if err != nil {
		return store.Checkpoint{}, storageErr("find checkpoint", err)
	}
	return c, nil
}

// Fork creates a new process from checkpoint id and returns its PID. The fork has
// new identities: a new PID, and every JIT binding of the snapshot re-created under
// it with a new tool ID (same name, same contract, same program, rebuilt by
// Config.JIT). The candidates stay owned by the process that proposed them; the new
// bindings point at them (store.Binding.CandidatePID). The fork gets the snapshot's
// capabilities, projection, active Skills, key/value space and budget counters.
// Everything is one batch, with process_forked in the new log and checkpoint_forked
// in the checkpoint's. A checkpoint of a killed process can still be forked.
func (k *Kernel) Fork(ctx context.Context, id string) (string, error) {
	if err := k.enter(); err != nil {
		return "", err
	}
	defer k.calls.Done()
	ck, err := k.findCheckpoint(id)
	if err != nil {
		return "", err
	}
	var snap snapshot
	if err := json.Unmarshal(ck.Snapshot, &snap); err != nil || snap.Image == nil {
		return "", storageErr("fork: checkpoint "+id+" is unreadable", fmt.Errorf("snapshot: %v", err))
	}
	if snap.Version != 1 {
		return "", errorf(CodeInvalidState, "fork: checkpoint %s has snapshot version %d, which this kernel does not read", id, snap.Version)
	}
	if len(snap.Bindings) > 0 && k.jit == nil {
		return "", errorf(CodeInvalidConfig, "fork: checkpoint %s holds %d JIT bindings and the kernel has no JIT loader (Config.JIT) to re-create them", id, len(snap.Bindings))
	}
	img := snap.Image.Clone()
	img.Projection = snap.Projection
	p, err := k.newProcess(newID("pid_"), img, snap.Capabilities)
	if err != nil {
		return "", fmt.Errorf("engine: fork %s: %w", id, err)
	}
	p.parent, p.checkpoint, p.active = ck.PID, id, slices.Clone(snap.ActiveSkills)
	if snap.Gated {
		p.allowed = map[string]bool{}
		for _, n := range snap.Gate {
			p.allowed[n] = true
		}
	}
	var binds []store.Binding
	var renamed []map[string]string
	for _, sb := range snap.Bindings {
		b := store.Binding{PID: p.pid, Name: sb.Name, ToolID: newID("tool_"), CandidateID: sb.CandidateID, CandidatePID: sb.CandidatePID, Scope: sb.Scope}
		if _, taken := p.tools[b.Name]; taken {
			return "", toolErr(b.Name, "fork: the binding's name is a built-in tool of the image")
		}
		e, err := k.loadJIT(ctx, b, p.limits.MaxDepth)
		if err != nil {
			return "", fmt.Errorf("engine: fork %s: re-create %s: %w", id, b.Name, err)
		}
		p.tools[b.Name] = e
		binds = append(binds, b)
		renamed = append(renamed, map[string]string{"name": b.Name, "tool_id": b.ToolID, "from_tool_id": sb.ToolID, "candidate_id": b.CandidateID, "candidate_pid": b.CandidatePID})
	}
	if renamed == nil {
		renamed = []map[string]string{}
	}
	forked, _ := json.Marshal(map[string]any{"parent": ck.PID, "by": "operator", "checkpoint_id": id, "checkpoint_seq": ck.EventSeq,
		"bindings": renamed, "kv_entries": len(snap.KV), "capabilities": p.capStrings(), "projection": p.projection,
		"image": img.Name, "image_version": img.Version, "image_sha256": img.Digest()})
	child, _ := json.Marshal(map[string]any{"checkpoint_id": id, "child": p.pid, "by": "operator"})
	p.mu.Lock()
	err = k.st.Update(ctx, func(tx *store.Tx) error {
		p.created = tx.Now()
		if err := k.putProcess(tx, p); err != nil {
			return err
		}
		for _, kv := range snap.KV {
			if err := tx.KVPut(p.pid, kv.Key, kv.Value); err != nil {
				return err
			}
			if err := tx.KVSetLabels(p.pid, kv.Key, kv.Labels); err != nil {
				return err
			}
		}
		for _, b := range snap.Budgets {
			if _, err := tx.Charge(p.pid, b.Name, b.Used, -1); err != nil {
				return err
			}
		}
		for _, b := range binds {
			if err := tx.AddBinding(b); err != nil {
				return err
			}
		}
		if _, err := tx.Append(p.pid, EventProcessForked, forked); err != nil {
			return err
		}
		_, err := tx.Append(ck.PID, EventCheckpointForked, child)
		return err
	})
	p.mu.Unlock()
	if err != nil {
		return "", storageErr("fork "+id, err)
	}
	k.mu.Lock()
	k.procs[p.pid] = p
	k.mu.Unlock()
	return p.pid, nil
}

// Checkpoints lists the checkpoints of pid (live or killed).
func (k *Kernel) Checkpoints(pid string) ([]store.Checkpoint, error) {
	cs, err := k.st.Checkpoints(pid)
	if err != nil {
		return nil, storageErr("list checkpoints", err)
	}
	return cs, nil
}

// RevokeBinding is the operator's cleanup of a JIT tool (the model has no
// unregister): the tool leaves pid's table and its binding is deleted, with a
// jit_revoked event (by operator, with reason) and a tools_changed event in the same
// batch. The candidate keeps its history; the name is free again. Pending approvals
// bound to the tool's definition no longer apply to anything.
func (k *Kernel) RevokeBinding(ctx context.Context, pid, name, reason string) error {
	p, err := k.process(pid)
	if err != nil {
		return err
	}
	p.mu.RLock()
	e := p.tools[name]
	p.mu.RUnlock()
	if e == nil || e.Kind != KindJIT {
		return &Error{Layer: layer, Code: CodeNotFound, Message: fmt.Sprintf("process %s has no JIT tool named %q", pid, name)}
	}
	var missing bool
	err = k.RemoveTool(ctx, pid, name, func(tx *store.Tx) error {
		b, err := tx.DeleteBinding(pid, name)
		if errors.Is(err, store.ErrNotFound) {
			missing = true
		}
		if err != nil {
			return err
		}
		data, _ := json.Marshal(map[string]any{"tool": name, "tool_id": b.ToolID, "candidate_id": b.CandidateID, "by": "operator", "reason": reason})
		_, err = tx.Append(pid, EventJITRevoked, data)
		return err
	})
	if missing {
		return &Error{Layer: layer, Code: CodeNotFound, Message: fmt.Sprintf("process %s has no committed binding for %q", pid, name), Err: err}
	}
	return err
}
