package syscalls

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// Caller is the authority a syscall runs with: the calling process, what it holds, who
// approves for it and how it calls its own tools. The engine builds one per tool call
// and hands it to Router.For.
type Caller struct {
	// PID is the calling process. kv is scoped to it, tools.call calls its tools, audit
	// events and budgets are recorded under it. Required.
	PID string
	// Tool names the tool whose code is making the syscalls, for the audit log.
	Tool string
	// CallID is the tool call whose code is making the syscalls. When set, every
	// syscall's result or typed error is journaled under it (store.JournalEntry), in
	// the same batch as its audit event, so the call can be exported as a tape and
	// replayed. Empty: nothing is journaled.
	CallID string
	// Journal bounds the call's journal; zero fields are the defaults.
	Journal JournalLimits
	// Capabilities is consulted on every call, never copied: an operator who revokes a
	// capability stops the very next syscall. Nil holds nothing.
	Capabilities CapabilitySet
	// Approver decides calls whose approval class is operator. Nil denies them.
	Approver Approver
	// Tools runs tools.call. Nil makes tools.call fail with provider_failed.
	Tools ToolCaller
	// Depth is how many tools.call frames are above this tool call: 0 for a tool the
	// model called. tools.call passes Depth+1 on and refuses beyond the router's bound.
	Depth int
	// Deferred says that a synced write will settle the call these syscalls belong to
	// (the engine's tool_result or tool_failed) before anything of it is acknowledged.
	// The router then writes budget charges, staged writes and audit events with
	// store.UpdateDeferred: they are visible at once and become durable with that
	// settlement, because the store's log is replayed as a prefix after a crash. False:
	// each syscall's writes are synced before Syscall returns.
	Deferred bool
	// Policy is the image's route policy, one typed slot per part (PolicySlot): the
	// routes it raises to operator approval, its durable syscall budgets, its size
	// bounds, egress, secrets, labels and data-flow rules. Nil is the zero policy:
	// nothing raised, no budget or bound, every fetch refused, nothing labelled.
	//
	// Budgets: a call is charged against every budget that applies (BudgetAll, its
	// area, the route) before its provider runs, durably in the store ("syscalls",
	// "syscalls:kv", "syscalls:kv.put"); a denied call is not charged.
	Policy *Policy
}

// BudgetAll is the budget name that counts every routed syscall of a process.
const BudgetAll = "syscalls"

// CapabilitySet is the live set of capabilities a process holds.
type CapabilitySet interface {
	Has(c Capability) bool
}

// CapSet is a CapabilitySet that can be changed while calls run. The zero value holds
// nothing and is ready to use.
type CapSet struct {
	mu   sync.RWMutex
	caps map[Capability]struct{}
	// strs is Strings' answer until the set changes (nil: not made yet).
	strs []string
}

// NewCapSet returns a set holding caps.
func NewCapSet(caps ...Capability) *CapSet {
	s := &CapSet{}
	for _, c := range caps {
		s.Grant(c)
	}
	return s
}

// Has reports whether c is held, exactly.
func (s *CapSet) Has(c Capability) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.caps[c]
	return ok
}

// Grant adds c.
func (s *CapSet) Grant(c Capability) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caps == nil {
		s.caps = map[Capability]struct{}{}
	}
	s.caps[c] = struct{}{}
	s.strs = nil
}

// Revoke removes c; calls already past the capability check finish.
func (s *CapSet) Revoke(c Capability) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.caps, c)
	s.strs = nil
}

// Strings returns the held capabilities as sorted strings. The slice is shared by
// every caller until the set changes (the kernel stamps it on each call it opens, and
// it changes far less often than calls are made): read it, never write to it. It is
// clipped, so appending to it copies.
func (s *CapSet) Strings() []string {
	s.mu.RLock()
	strs := s.strs
	s.mu.RUnlock()
	if strs != nil {
		return strs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.strs == nil {
		s.strs = make([]string, 0, len(s.caps))
		for c := range s.caps {
			s.strs = append(s.strs, string(c))
		}
		sort.Strings(s.strs)
		s.strs = slices.Clip(s.strs)
	}
	return s.strs
}

// List returns the held capabilities, sorted.
func (s *CapSet) List() []Capability {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Capability, 0, len(s.caps))
	for c := range s.caps {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ApprovalRequest is what an approver is asked.
type ApprovalRequest struct {
	PID        string
	Tool       string
	Route      string
	Capability Capability
	Effect     SideEffect
	// Args are the validated arguments of the call.
	Args json.RawMessage
	// Deadline is when the call stops waiting; a decision after it is ignored.
	Deadline time.Time
}

// Decision is an approver's answer.
type Decision struct {
	Approved bool
	// By names who decided ("operator:alice", "policy:auto-approve"), for the audit log.
	By string
	// Reason is shown to the guest on denial and kept in the audit log.
	Reason string
}

// Approver decides calls whose approval class is operator. Approve must return when
// ctx is done (the router bounds ctx by the call's deadline); returning ctx.Err() then
// makes the call fail with approval_timeout.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// AutoApprove is the policy that approves every request without waiting.
func AutoApprove() Approver {
	return ApproverFunc(func(context.Context, ApprovalRequest) (Decision, error) {
		return Decision{Approved: true, By: "policy:auto-approve"}, nil
	})
}

// AutoDeny is the policy that denies every request without waiting, with reason.
func AutoDeny(reason string) Approver {
	return ApproverFunc(func(context.Context, ApprovalRequest) (Decision, error) {
		return Decision{Approved: false, By: "policy:auto-deny", Reason: reason}, nil
	})
}

// ToolCaller runs another tool of the same process through the engine's full pipeline
// (lookup, schema validation, budgets, events, sandbox). depth is the nesting depth of
// the call being made (1 for a tools.call from a tool the model called); the engine
// passes it back as Caller.Depth for the syscalls of that nested tool. An error that is
// (or wraps) an *Error, or that has an ErrorCode() string method (the engine's errors),
// keeps its code in the guest; any other error becomes provider_failed.
type ToolCaller interface {
	CallTool(ctx context.Context, pid, tool string, args json.RawMessage, depth int) (json.RawMessage, error)
}

// ValueToolCaller is a ToolCaller that also takes the arguments as the boundary
// decoded them (value is args, decoded exactly once where the syscall came in), so
// that the engine does not parse them again. tools.call uses it when the ToolCaller
// has it.
type ValueToolCaller interface {
	ToolCaller
	CallToolValue(ctx context.Context, pid, tool string, args json.RawMessage, value jsonexact.Value, depth int) (json.RawMessage, error)
}

// Clock is where clock.now reads the time. Tests inject a fixed one.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// FixedClock returns a Clock that always says t.
func FixedClock(t time.Time) Clock { return ClockFunc(func() time.Time { return t }) }
