package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// Approval states. pending → approved → used, or pending → denied | expired.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved" // decided yes; the call it was asked for has not used it yet
	ApprovalUsed     = "used"     // a call with the same arguments and definition went ahead on it
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired" // no decision in time: a timeout denies
)

// Approval events, in the log of the process that asked.
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalDecided   = "approval_decided"
	EventApprovalExpired   = "approval_expired"
	EventApprovalUsed      = "approval_used"
	// EventApprovalInapplicable: an approval was granted, but the tool definition
	// changed while the call waited, so it did not apply.
	EventApprovalInapplicable = "approval_inapplicable"
)

// Kinds of approval.
const (
	approvalTool  = "tool"  // an operator-class tool, before its call opens
	approvalRoute = "route" // an operator-class syscall, from inside a JIT tool's call
)

// Approval is a durable request for an operator decision: who asked (PID, the tool
// and the path the call came by), for what (a tool, or a syscall route), with which
// exact arguments (canonical JSON) and against which exact tool definition (the
// SHA-256 of the tool's name, kind, ID, description, schemas and annotations). A
// decision applies only to a call with the same arguments and definition.
type Approval struct {
	ID  string // appr_ + 128 random bits
	PID string
	// Kind is "tool" (the call of an operator-class tool) or "route" (an
	// operator-class syscall made by Tool).
	Kind    string
	Subject string // the tool or the route
	// Tool is the tool whose call asks: Subject itself for a tool approval, the JIT
	// tool making the syscall for a route approval. ToolID is its ID (JIT tools).
	Tool       string
	ToolID     string
	Via        string // model or host
	Capability string // the route's capability (route approvals)
	// Args are the exact arguments, canonical JSON.
	Args             json.RawMessage
	ArgsSHA256       string
	DefinitionSHA256 string
	State            string
	Reason           string
	DecidedBy        string
	Created          time.Time
	Deadline         time.Time
	Decided          time.Time
}

// approvalRequest is Approval's part kept in store.Approval.Request.
type approvalRequest struct {
	Kind             string          `json:"kind"`
	Tool             string          `json:"tool"`
	ToolID           string          `json:"tool_id,omitempty"`
	Via              string          `json:"via"`
	Capability       string          `json:"capability,omitempty"`
	Args             json.RawMessage `json:"args"`
	ArgsSHA256       string          `json:"args_sha256"`
	DefinitionSHA256 string          `json:"definition_sha256"`
	Deadline         time.Time       `json:"deadline"`
	DecidedBy        string          `json:"decided_by,omitempty"`
}

type approvalSubject struct {
	kind, subject, tool, via, capability string
	args                                 []byte // canonical JSON
}

type waiter struct{ done chan struct{} }

func approvalOf(a store.Approval) Approval {
	var r approvalRequest
	_ = json.Unmarshal(a.Request, &r)
	return Approval{
		ID: a.ID, PID: a.PID, Kind: r.Kind, Subject: a.Subject, Tool: r.Tool, ToolID: r.ToolID, Via: r.Via,
		Capability: r.Capability, Args: r.Args, ArgsSHA256: r.ArgsSHA256, DefinitionSHA256: r.DefinitionSHA256,
		State: a.State, Reason: a.Reason, DecidedBy: r.DecidedBy, Created: a.Created, Deadline: r.Deadline, Decided: a.Decided,
	}
}

// expire makes a an approval that expired at t without a decision.
func (a *Approval) expire(t time.Time) {
	a.State, a.Reason, a.DecidedBy, a.Decided = ApprovalExpired, "no decision before the deadline", "timeout", t
}

func (a Approval) record() store.Approval {
	req, _ := json.Marshal(approvalRequest{
		Kind: a.Kind, Tool: a.Tool, ToolID: a.ToolID, Via: a.Via, Capability: a.Capability, Args: a.Args,
		ArgsSHA256: a.ArgsSHA256, DefinitionSHA256: a.DefinitionSHA256, Deadline: a.Deadline, DecidedBy: a.DecidedBy,
	})
	return store.Approval{ID: a.ID, PID: a.PID, Class: string(syscalls.ApprovalOperator), Subject: a.Subject, Request: req,
		State: a.State, Reason: a.Reason, Decided: a.Decided}
}

func (a Approval) eventData(extra map[string]any) json.RawMessage {
	m := map[string]any{"approval_id": a.ID, "kind": a.Kind, "subject": a.Subject, "tool": a.Tool,
		"args_sha256": a.ArgsSHA256, "definition_sha256": a.DefinitionSHA256, "state": a.State}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// definitionHash is what an approval is bound to besides the arguments.
func definitionHash(t Tool, in, out json.RawMessage) string {
	b, _ := json.Marshal(map[string]any{
		"name": t.Name, "kind": t.Kind, "id": t.ID, "description": t.Description,
		"input_schema": in, "output_schema": out, "annotations": t.Annotations,
	})
	return hexSum(b)
}

// awaitApproval blocks until the operator decides an approval for sub, the deadline
// passes (a timeout denies) or the kernel closes. An approved but unused approval for
// the very same arguments and definition is used at once; a pending one nobody waits
// for any more (its call ended with a kernel stop) is waited on again. It returns the
// decider on success.
func (k *Kernel) awaitApproval(ctx context.Context, p *process, sub approvalSubject) (string, *Error) {
	argsSum := hexSum(sub.args)
	p.mu.RLock()
	e := p.tools[sub.tool]
	p.mu.RUnlock()
	var defHash, toolID string
	if e != nil {
		defHash, toolID = e.defHash, e.ID
	}
	deadline := time.Now().Add(k.approvalTimeout)
	if d, ok := ctx.Deadline(); ok && (sub.kind == approvalRoute || d.Before(deadline)) {
		deadline = d // a syscall waits as long as the router lets it
	}

	// The client's answer, when the call is the retry that brings one.
	if err := k.applyClientDecision(ctx, p, sub, argsSum, defHash); err != nil {
		return "", err
	}

	k.apprMu.Lock()
	a, found, err := k.applicableApproval(ctx, p, sub, argsSum, defHash)
	if err != nil {
		k.apprMu.Unlock()
		return "", err
	}
	if found && a.State == ApprovalUsed {
		k.apprMu.Unlock()
		return a.DecidedBy, nil
	}
	if !found {
		a = Approval{ID: newID("appr_"), PID: p.pid, Kind: sub.kind, Subject: sub.subject, Tool: sub.tool, ToolID: toolID,
			Via: sub.via, Capability: sub.capability, Args: sub.args, ArgsSHA256: argsSum, DefinitionSHA256: defHash,
			State: ApprovalPending, Deadline: deadline.UTC()}
		k.setOwner(a.ID, p.pid) // before it is visible in the store, so that Approve finds it
		err := k.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
			a.Created = tx.Now()
			if err := tx.PutApproval(a.record()); err != nil {
				return err
			}
			_, err := tx.Append(p.pid, EventApprovalRequested, a.eventData(map[string]any{"via": a.Via, "deadline": a.Deadline}))
			return err
		})
		if err != nil {
			k.apprMu.Unlock()
			return "", storageErr("record the approval request", err)
		}
	} else {
		deadline = a.Deadline
	}
	w := &waiter{done: make(chan struct{})}
	k.waiters[a.ID] = w
	k.apprMu.Unlock()
	defer func() {
		k.apprMu.Lock()
		if k.waiters[a.ID] == w {
			delete(k.waiters, a.ID)
		}
		k.apprMu.Unlock()
	}()
	// The call's client, when it can be asked, is: it answers now (the call waits for
	// the decision as for the operator's) or with a retry (the call ends here, the
	// approval pending, and the retry waits on it or uses it).
	if wait, asked := askClient(ctx, a); asked && !wait {
		return "", &Error{Layer: layer, Code: CodeApprovalRequired,
			Message: fmt.Sprintf("%s needs approval %s; its client was asked, and the operator can decide it too ('libos approve %s')", sub.subject, a.ID, a.ID)}
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	woke := wokeDecided
	select {
	case <-w.done:
	case <-ctx.Done():
		// The caller's deadline is a timeout like the approval's own; a caller that
		// went away (Ctrl-C, a cancelled request) cancels.
		woke = wokeCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			woke = wokeTimeout
		}
	case <-timer.C:
		woke = wokeTimeout
	case <-k.closing:
		return "", &Error{Layer: layer, Code: CodeClosed, Message: fmt.Sprintf("the kernel is closing; approval %s stays pending and can still be decided", a.ID)}
	}
	return k.settleApproval(context.WithoutCancel(ctx), p, a.ID, sub.tool, woke)
}

// Why an approval wait ended.
const (
	wokeDecided  = iota // a decision arrived
	wokeTimeout         // the deadline passed: a timeout denies
	wokeCanceled        // the caller went away: the approval expires with its call
)

// applicableApproval finds an approval of p for exactly sub: an approved one is used
// now (state used); a pending one with nobody waiting and time left is returned to be
// waited on. Call with k.apprMu held.
func (k *Kernel) applicableApproval(ctx context.Context, p *process, sub approvalSubject, argsSum, defHash string) (Approval, bool, *Error) {
	recs, err := k.st.Approvals(p.pid)
	if err != nil {
		return Approval{}, false, storageErr("read approvals", err)
	}
	now := time.Now()
	for _, r := range recs {
		a := approvalOf(r)
		if a.Kind != sub.kind || a.Subject != sub.subject || a.Tool != sub.tool || a.ArgsSHA256 != argsSum || a.DefinitionSHA256 != defHash {
			continue
		}
		switch {
		case a.State == ApprovalApproved:
			used, uerr := k.useApproval(ctx, p, a.ID)
			if uerr != nil {
				return Approval{}, false, uerr
			}
			if used {
				a.State = ApprovalUsed
				return a, true, nil
			}
		case a.State == ApprovalPending && k.waiters[a.ID] == nil && now.Before(a.Deadline):
			return a, true, nil
		}
	}
	return Approval{}, false, nil
}

// useApproval moves an approved approval to used, with an approval_used event.
func (k *Kernel) useApproval(ctx context.Context, p *process, id string) (bool, *Error) {
	used := false
	err := k.st.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		r, err := tx.Approval(p.pid, id)
		if err != nil {
			return err
		}
		if r.State != ApprovalApproved {
			return nil
		}
		a := approvalOf(r)
		a.State = ApprovalUsed
		if err := tx.PutApproval(a.record()); err != nil {
			return err
		}
		used = true
		_, err = tx.Append(p.pid, EventApprovalUsed, a.eventData(nil))
		return err
	})
	if err != nil {
		return false, storageErr("use the approval", err)
	}
	return used, nil
}

// settleApproval reads the outcome of approval id after its wait: approved and still
// applicable (the tool's definition is the one approved) → used; denied → denied;
// still pending after a timeout → expired.
func (k *Kernel) settleApproval(ctx context.Context, p *process, id, tool string, woke int) (string, *Error) {
	var out *Error
	var by string
	err := k.st.Update(ctx, func(tx *store.Tx) error {
		r, err := tx.Approval(p.pid, id)
		if err != nil {
			return err
		}
		a := approvalOf(r)
		by = a.DecidedBy
		switch a.State {
		case ApprovalPending:
			switch woke {
			case wokeTimeout:
				a.expire(tx.Now())
				out = &Error{Layer: layer, Code: CodeApprovalTimeout, Message: fmt.Sprintf("no operator decision on approval %s before its deadline; a timeout denies", id)}
			case wokeCanceled:
				a.State, a.Reason, a.Decided, a.DecidedBy = ApprovalExpired, "the call was cancelled before a decision", tx.Now(), "caller"
				out = &Error{Layer: layer, Code: CodeCanceled, Message: fmt.Sprintf("the call was cancelled while approval %s was pending; the approval expired with it", id)}
			default:
				return fmt.Errorf("approval %s woke up undecided", id)
			}
			if err := tx.PutApproval(a.record()); err != nil {
				return err
			}
			_, err = tx.Append(p.pid, EventApprovalExpired, a.eventData(nil))
			return err
		case ApprovalApproved:
			p.mu.RLock()
			e := p.tools[a.Tool]
			p.mu.RUnlock()
			cur := ""
			if e != nil {
				cur = e.defHash
			}
			if cur != a.DefinitionSHA256 {
				out = &Error{Layer: layer, Code: CodeApprovalDenied, Message: fmt.Sprintf("approval %s was granted for another definition of %s (sha256 %s); it does not apply to the current one", id, a.Tool, a.DefinitionSHA256)}
				_, err = tx.Append(p.pid, EventApprovalInapplicable, a.eventData(map[string]any{"current_definition_sha256": cur}))
				return err
			}
			a.State = ApprovalUsed
			if err := tx.PutApproval(a.record()); err != nil {
				return err
			}
			_, err = tx.Append(p.pid, EventApprovalUsed, a.eventData(nil))
			return err
		case ApprovalDenied, ApprovalExpired:
			msg := fmt.Sprintf("approval %s was %s", id, a.State)
			if a.Reason != "" {
				msg += ": " + a.Reason
			}
			code := CodeApprovalDenied
			if a.State == ApprovalExpired {
				code = CodeApprovalTimeout
			}
			out = &Error{Layer: layer, Code: code, Message: msg}
			return nil
		}
		out = &Error{Layer: layer, Code: CodeApprovalDenied, Message: fmt.Sprintf("approval %s is %s", id, a.State)}
		return nil
	})
	if err != nil {
		return "", storageErr("settle the approval", err)
	}
	return by, out
}

// Approve grants pending approval id: the call waiting on it proceeds, provided the
// tool definition is still the one approved. The decision is durable and recorded.
func (k *Kernel) Approve(ctx context.Context, id string) error {
	return k.decide(ctx, id, true, "", "operator")
}

// Deny refuses pending approval id with reason: the waiting call fails with
// approval_denied. The decision is durable and recorded.
func (k *Kernel) Deny(ctx context.Context, id, reason string) error {
	return k.decide(ctx, id, false, reason, "operator")
}

func (k *Kernel) decide(ctx context.Context, id string, approve bool, reason, by string) error {
	if err := k.enter(); err != nil {
		return err
	}
	defer k.calls.Done()
	pid, err := k.approvalOwner(id)
	if err != nil {
		return err
	}
	return k.decideIn(ctx, pid, id, approve, reason, by)
}

// decideIn decides approval id of pid, by by (the operator, the kernel, a client).
func (k *Kernel) decideIn(ctx context.Context, pid, id string, approve bool, reason, by string) error {
	var refusal *Error
	err := k.st.Update(ctx, func(tx *store.Tx) error {
		r, err := tx.Approval(pid, id)
		if err != nil {
			return err
		}
		a := approvalOf(r)
		if a.State != ApprovalPending {
			refusal = errorf(CodeInvalidState, "approval %s is already %s", id, a.State)
			return nil
		}
		a.Decided, a.DecidedBy, a.Reason = tx.Now(), by, reason
		typ, decision := EventApprovalDecided, "approved"
		a.State = ApprovalApproved
		if !approve {
			a.State, decision = ApprovalDenied, "denied"
		}
		if tx.Now().After(a.Deadline) {
			a.expire(a.Decided)
			typ, decision = EventApprovalExpired, "expired"
			refusal = errorf(CodeInvalidState, "approval %s expired at %s, before this decision", id, a.Deadline.Format(time.RFC3339Nano))
		}
		if err := tx.PutApproval(a.record()); err != nil {
			return err
		}
		_, err = tx.Append(pid, typ, a.eventData(map[string]any{"decision": decision, "by": a.DecidedBy, "reason": a.Reason}))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeNotFound, "no approval %q", id)
	}
	if err != nil {
		return storageErr("decide approval "+id, err)
	}
	k.wake(id)
	if refusal != nil {
		return refusal
	}
	return nil
}

func (k *Kernel) wake(id string) {
	k.apprMu.Lock()
	if w := k.waiters[id]; w != nil {
		delete(k.waiters, id)
		close(w.done)
	}
	k.apprMu.Unlock()
}

// approvalOwner finds the process an approval belongs to.
func (k *Kernel) approvalOwner(id string) (string, error) {
	notFound := errorf(CodeNotFound, "no approval %q", liberr.Clip(id, 80))
	if !strings.HasPrefix(id, "appr_") || len(id) != len("appr_")+32 {
		return "", notFound
	}
	if pid, ok := k.owner(id); ok {
		return pid, nil
	}
	return "", notFound
}

// denyPending denies, inside tx, every pending approval of pid with reason, decided
// by "kernel", and returns their IDs for wake. A read or write that fails fails tx, so
// the caller's change and the denials are durable together or not at all.
func denyPending(tx *store.Tx, pid, reason string) ([]string, error) {
	recs, err := tx.Approvals(pid)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range recs {
		a := approvalOf(r)
		if a.State != ApprovalPending {
			continue
		}
		a.State, a.Decided, a.DecidedBy, a.Reason = ApprovalDenied, tx.Now(), "kernel", reason
		if err := tx.PutApproval(a.record()); err != nil {
			return nil, err
		}
		if _, err := tx.Append(pid, EventApprovalDecided, a.eventData(map[string]any{"decision": "denied", "by": a.DecidedBy, "reason": a.Reason})); err != nil {
			return nil, err
		}
		ids = append(ids, a.ID)
	}
	return ids, nil
}

// restoreApprovals expires, on Open, the pending approvals of p whose deadline
// passed while the kernel was stopped. The others stay pending: the operator can
// still decide them, and a retry of the same call waits on or uses them. On a
// read-only store it only notes them (k.expired), for Approvals to show.
func (k *Kernel) restoreApprovals(ctx context.Context, p *process) error {
	recs, err := k.st.Approvals(p.pid)
	if err != nil {
		return storageErr("open: approvals of "+p.pid, err)
	}
	now := time.Now()
	for _, r := range recs {
		a := approvalOf(r)
		if a.State != ApprovalPending || now.Before(a.Deadline) {
			continue
		}
		if k.st.ReadOnly() {
			if k.expired == nil {
				k.expired = map[string]time.Time{}
			}
			k.expired[a.ID] = now.UTC()
			continue
		}
		err := k.st.Update(ctx, func(tx *store.Tx) error {
			a.expire(tx.Now())
			if err := tx.PutApproval(a.record()); err != nil {
				return err
			}
			_, err := tx.Append(p.pid, EventApprovalExpired, a.eventData(nil))
			return err
		})
		if err != nil {
			return storageErr("open: expire approval "+a.ID, err)
		}
	}
	return nil
}

// Approvals lists the approvals of pid (live or killed), oldest first.
func (k *Kernel) Approvals(pid string) ([]Approval, error) {
	recs, err := k.st.Approvals(pid)
	if err != nil {
		return nil, storageErr("list approvals", err)
	}
	out := make([]Approval, len(recs))
	for i, r := range recs {
		out[i] = approvalOf(r)
		if t, ok := k.expired[r.ID]; ok && out[i].State == ApprovalPending {
			out[i].expire(t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// PendingApprovals lists the pending approvals of every process, oldest first.
func (k *Kernel) PendingApprovals() ([]Approval, error) {
	recs, err := k.st.Processes()
	if err != nil {
		return nil, storageErr("list approvals", err)
	}
	var out []Approval
	for _, r := range recs {
		as, err := k.Approvals(r.PID)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if a.State == ApprovalPending {
				out = append(out, a)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// routeApprover is the kernel as the syscalls.Approver of one call.
type routeApprover struct {
	k   *Kernel
	p   *process
	via string
}

// Approve records a pending approval for the syscall and waits for the operator.
// A timeout returns ctx's error, which the router reports as approval_timeout.
func (r routeApprover) Approve(ctx context.Context, req syscalls.ApprovalRequest) (syscalls.Decision, error) {
	args := req.Args
	if v, err := jsonexact.Decode(args, r.p.limits.MaxDepth); err == nil {
		args = v.Canonical()
	}
	by, err := r.k.awaitApproval(ctx, r.p, approvalSubject{kind: approvalRoute, subject: req.Route, tool: req.Tool, via: r.via,
		capability: string(req.Capability), args: args})
	switch {
	case err == nil:
		return syscalls.Decision{Approved: true, By: by}, nil
	case err.Code == CodeCanceled || (err.Code == CodeApprovalTimeout && ctx.Err() != nil):
		return syscalls.Decision{}, ctx.Err()
	case err.Code == CodeApprovalDenied || err.Code == CodeApprovalTimeout:
		return syscalls.Decision{Approved: false, By: "operator", Reason: err.Message}, nil
	}
	return syscalls.Decision{}, err
}
