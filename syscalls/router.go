package syscalls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"crypto/tls"
	"net"
	"os"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// EventSyscall is the type of the audit event every syscall decision writes.
const EventSyscall = "syscall"

// Defaults of RouterConfig.
const (
	DefaultMaxToolDepth    = 4
	DefaultApprovalTimeout = 2 * time.Minute
)

// RouterConfig configures a Router. Only Store is required.
type RouterConfig struct {
	// Store keeps kv data, budgets and the audit log. Required.
	Store *store.Store
	// Clock backs clock.now. Nil means the system clock.
	Clock Clock
	// MaxToolDepth bounds nested tools.call; zero means DefaultMaxToolDepth.
	MaxToolDepth int
	// ApprovalTimeout bounds how long a call waits for an approval decision, on top of
	// the call's own deadline; zero means DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Resolver resolves the host names net.fetch reaches; nil means net.DefaultResolver.
	Resolver Resolver
	// LookupEnv reads the environment variables secrets come from; nil means
	// os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// TLS is the client configuration of https fetches (roots); nil means the
	// system's roots.
	TLS *tls.Config
}

// Router is the production syscall path. It is safe for concurrent use; For binds it to
// one caller.
type Router struct {
	store           *store.Store
	clock           Clock
	maxDepth        int
	approvalTimeout time.Duration
	routes          map[string]*route
	resolver        Resolver
	lookupEnv       func(string) (string, bool)
	tls             *tls.Config
}

// NewRouter checks cfg and compiles the route table (once per program).
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Store == nil {
		return nil, errors.New("syscalls: RouterConfig.Store is required")
	}
	rs, err := routes()
	if err != nil {
		return nil, err
	}
	r := &Router{
		store:           cfg.Store,
		clock:           cfg.Clock,
		maxDepth:        cfg.MaxToolDepth,
		approvalTimeout: cfg.ApprovalTimeout,
		routes:          rs,
		resolver:        cfg.Resolver,
		lookupEnv:       cfg.LookupEnv,
		tls:             cfg.TLS,
	}
	if r.resolver == nil {
		r.resolver = net.DefaultResolver
	}
	if r.lookupEnv == nil {
		r.lookupEnv = os.LookupEnv
	}
	if r.tls == nil {
		r.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if r.clock == nil {
		r.clock = ClockFunc(time.Now)
	}
	if r.maxDepth <= 0 {
		r.maxDepth = DefaultMaxToolDepth
	}
	if r.approvalTimeout <= 0 {
		r.approvalTimeout = DefaultApprovalTimeout
	}
	return r, nil
}

// Bound is a Router bound to one caller: what the engine hands to wasm.Run.
type Bound struct {
	r      *Router
	caller Caller
	// jr journals the syscalls of the caller's tool call; nil when there is none.
	jr *journal
	// taint is the call's own data-flow labels, unless a tools.call above handed its
	// own down through the context (taintOf).
	taint taint
	// refused is the last error of this package a Syscall returned (Refusal).
	refused atomic.Pointer[Error]
}

// For binds the router to caller. The result implements wasm.Syscaller. A caller with
// a CallID gets every syscall journaled under that call.
func (r *Router) For(caller Caller) *Bound {
	b := &Bound{r: r, caller: caller}
	if caller.CallID != "" {
		b.jr = &journal{limits: caller.Journal.withDefaults()}
	}
	return b
}

// Refusal is the last refusal a Syscall of b returned (a denial, a provider's
// failure, an audit failure: an *Error), or nil. When the program of a tool let a
// refused syscall escape, its caller reports the refusal's own message with it, so
// the sandbox needs no wrapper of the caller's between itself and the router.
func (b *Bound) Refusal() *Error { return b.refused.Load() }

// Syscall runs one call: route lookup → capability → approval → argument validation →
// budget → provider → result validation → audit event. Every outcome, allowed or
// denied, is one audit event; a call whose event cannot be written fails.
func (b *Bound) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return b.settle(b.syscall(ctx, name, decodeArgs(args)))
}

// SyscallExact is Syscall for arguments the sandbox has already decoded exactly:
// value is args's one decoding (wasm.ExactSyscaller), and nothing here parses them
// again. Every check, the audit record and the journal read value as they would read
// Syscall's own decoding.
func (b *Bound) SyscallExact(ctx context.Context, name string, args json.RawMessage, value jsonexact.Value) (json.RawMessage, error) {
	in := syscallArgs{sent: args, raw: args, value: value}
	if len(args) == 0 {
		// The sandbox never sends nothing; kept in step with decodeArgs all the same.
		in = decodeArgs(args)
	}
	return b.settle(b.syscall(ctx, name, in))
}

// settle notes a refusal (Refusal) and hands the outcome on.
func (b *Bound) settle(res json.RawMessage, err error) (json.RawMessage, error) {
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			b.refused.Store(se)
		}
	}
	return res, err
}

func (b *Bound) syscall(ctx context.Context, name string, in syscallArgs) (json.RawMessage, error) {
	start := time.Now()
	ev := auditEvent{Route: liberr.Clip(name, 64), Tool: b.caller.Tool, Depth: b.caller.Depth}
	// The arguments are parsed once, at the boundary (the sandbox's, or Syscall's
	// own): the audit record, the route's checks, its provider and the journal all
	// read that decoding.
	args := in.sent
	exact := len(args) > 0 && in.err == nil
	ev.noteArgs(args, in)
	var staged *call
	result, err := b.run(ctx, name, in, &ev, &staged)
	if err != nil {
		se, ok := guestError(err)
		if !ok {
			se = errorf(CodeProviderFailed, "provider failed", err)
			err = se
		}
		ev.Decision, ev.Code, ev.Reason = "denied", string(se.Code), reason(se)
		if se.Err != nil {
			ev.Cause = liberr.Clip(se.Err.Error(), 512)
		}
		if ev.Stage == "provider" || ev.Stage == "result" {
			ev.Decision = "allowed" // the call was authorised; what failed is the provider
		}
	} else {
		ev.Decision = "allowed"
		ev.Stage = "done"
		sum := sha256.Sum256(result)
		ev.ResultSHA256 = hex.EncodeToString(sum[:])
	}
	var writes []func(tx *store.Tx) error
	if err == nil && staged != nil {
		writes = staged.writes // a failed call changes nothing
	}
	var entry *store.JournalEntry
	if b.jr != nil {
		var se *Error
		errors.As(err, &se)
		// The labels the route's result carried: a call that saw them is refused for
		// export when the image's rules keep them inside.
		e := b.jr.entry(b.caller.PID, b.caller.CallID, ev.Route, args, exact, result, se, ev.Labels)
		entry = &e
	}
	ev.DurationMicros = time.Since(start).Microseconds()
	if aerr := b.commit(ctx, &ev, writes, entry); aerr != nil {
		// Nothing unaudited is acknowledged: the staged writes were not applied either.
		msg := "could not record the audit event; the call changed nothing"
		if staged != nil && staged.route.provider.direct {
			msg = "could not record the audit event after the provider ran; its effects may have happened"
		}
		return nil, errorf(CodeAuditFailed, msg, aerr)
	}
	if err != nil {
		return nil, err
	}
	return result, nil
}

func (b *Bound) run(ctx context.Context, name string, in syscallArgs, ev *auditEvent, staged **call) (json.RawMessage, error) {
	args := in.sent
	c := &b.caller
	ev.Stage = "route"
	rt, ok := b.r.routes[name]
	if !ok {
		return nil, &Error{Code: CodeUnknownSyscall, Message: unknownSyscallMessage}
	}

	if rt.opaqueArgs {
		ev.Args = nil // bodies and header values stay out of the log; the digest stays
	}
	ev.Stage = "capability"
	ev.Capability = string(rt.auth.capability)
	if c.Capabilities == nil || !c.Capabilities.Has(rt.auth.capability) {
		return nil, errorf(CodeCapabilityDenied,
			fmt.Sprintf("%s requires capability %s, which this process does not hold", rt.name, rt.auth.capability), nil)
	}

	// The image's size bound on the arguments (slot size) is decided before anyone
	// is asked to approve them: their length is known without reading them.
	bound := c.Policy.sizeBound(rt.name)
	if bound.MaxArgsBytes > 0 && int64(len(in.sent)) > bound.MaxArgsBytes {
		ev.Stage = "args_size"
		return nil, errorf(CodeLimitExceeded, fmt.Sprintf("%s: arguments are %d bytes, more than the image's bound of %d (%s)",
			rt.name, len(in.sent), bound.MaxArgsBytes, SlotSize.FieldName()), nil)
	}

	ev.Stage = "approval"
	if class := effectiveApproval(rt, c); class == ApprovalOperator {
		if in.err != nil {
			// Nobody is asked to approve text that is not exact JSON (syntax, duplicate
			// keys, lone surrogates, invalid UTF-8, depth): what an operator reads must be
			// what the provider would get. Saying so reveals nothing about the route's
			// contract.
			ev.Stage = "args"
			_, err := validateArgs(rt, in)
			return nil, err
		}
		ev.Approval = &auditApproval{Class: string(class)}
		if err := b.approve(ctx, rt, args, ev.Approval); err != nil {
			return nil, err
		}
	}

	// Arguments are checked only once the caller holds the authority for the route:
	// a refusal names what the route expects, which a caller without the capability
	// must not learn (the model has no syscall-schema introspection).
	ev.Stage = "args"
	argv, err := validateArgs(rt, in)
	if err != nil {
		return nil, err
	}

	cl := &call{router: b.r, caller: c, route: rt, raw: in.raw, value: in.value, args: argv, ev: ev, taint: b.taintOf(ctx)}
	if rt.check != nil {
		// The route's own policy slot, decided before anything is charged or sent.
		ev.Stage = "policy"
		if err := rt.check(cl); err != nil {
			return nil, err
		}
	}
	if rt.flow != nil {
		ev.Stage = "data_flow"
		if err := rt.flow(cl); err != nil {
			return nil, err
		}
	}

	if rt.provider.nests {
		// A refused nesting is a decision like a refused capability: denied before any
		// budget is charged, never an allowed call whose provider failed.
		ev.Stage = "depth"
		if depth := c.Depth + 1; depth > b.r.maxDepth {
			return nil, errorf(CodeLimitExceeded,
				fmt.Sprintf("%s: nesting depth %d exceeds the bound of %d", rt.name, depth, b.r.maxDepth), nil)
		}
	}

	ev.Stage = "budget"
	if limits := c.Policy.budgets(rt.name); len(limits) > 0 {
		if err := b.charge(ctx, limits); err != nil {
			return nil, err
		}
	}

	ev.Stage = "provider"
	if rt.provider.external {
		// An effect outside the store cannot wait for the settlement's sync: what led
		// to it is made durable first, so an effect never outlives its tool_called.
		if err := b.r.store.Sync(context.WithoutCancel(ctx)); err != nil {
			return nil, errorf(CodeAuditFailed, rt.name+": could not make the call's record durable before its effect; the provider did not run", err)
		}
	}
	*staged = cl
	out, err := rt.provider.run(ctx, cl)
	if err != nil {
		if _, ok := guestError(err); ok {
			return nil, err
		}
		// The cause stays on the host (in the audit event): store paths and engine
		// internals are not the guest's business.
		return nil, errorf(CodeProviderFailed, rt.name+": the provider failed", err)
	}

	ev.Stage = "result"
	v, err := jsonexact.DecodeAny(out, 0)
	if err != nil {
		return nil, errorf(CodeProviderFailed, rt.name+": result is not JSON: "+err.Error(), err)
	}
	if err := rt.resultSchema.Validate(v); err != nil {
		return nil, errorf(CodeProviderFailed, rt.name+": result does not match the route's result schema: "+schemaMessage(err), err)
	}
	// The image's size bound on the result (slot size): the result is withheld, and
	// the call's staged writes are not applied (a failed call changes nothing).
	if bound.MaxResultBytes > 0 && int64(len(out)) > bound.MaxResultBytes {
		ev.Stage = "result_size"
		return nil, errorf(CodeLimitExceeded, fmt.Sprintf("%s: result is %d bytes, more than the image's bound of %d (%s)",
			rt.name, len(out), bound.MaxResultBytes, SlotSize.FieldName()), nil)
	}
	return out, nil
}

// syscallArgs are a syscall's arguments as sent and as decoded, once, at the boundary.
type syscallArgs struct {
	sent  json.RawMessage // as the code sent them
	raw   json.RawMessage // sent, or "{}" when nothing was sent
	value jsonexact.Value
	err   error // why raw is not exact JSON
}

func decodeArgs(args json.RawMessage) syscallArgs {
	in := syscallArgs{sent: args, raw: args}
	if len(args) == 0 {
		in.raw = json.RawMessage("{}")
	}
	in.value, in.err = jsonexact.Decode(in.raw, 0)
	return in
}

// validateArgs checks the decoded arguments against the route's schema.
func validateArgs(rt *route, in syscallArgs) (map[string]any, error) {
	obj, problem, cause := checkArgs(rt, in)
	if problem != "" {
		return nil, errorf(CodeArgumentInvalid, rt.name+": "+problem, cause)
	}
	return obj, nil
}

// checkArgs is validateArgs's finding as data: what is wrong with the arguments,
// without the route's name, and its cause; "" when they pass.
func checkArgs(rt *route, in syscallArgs) (map[string]any, string, error) {
	if in.err != nil {
		return nil, "arguments are not valid JSON: " + in.err.Error(), in.err
	}
	v := in.value.ToAny()
	if err := rt.argsSchema.Validate(v); err != nil {
		return nil, schemaMessage(err), err
	}
	obj, _ := v.(map[string]any) // every args schema demands an object
	return obj, "", nil
}

// effectiveApproval is the stricter of the table's class and the image's approval
// slot (Caller.Policy), which can only raise a route.
func effectiveApproval(rt *route, c *Caller) ApprovalClass {
	if rt.auth.approval != ApprovalNone || c.Policy.operatorApproval(rt.name) {
		return ApprovalOperator
	}
	return ApprovalNone
}

// approve asks the caller's approver, bounded by the call's deadline and the router's
// approval timeout.
func (b *Bound) approve(ctx context.Context, rt *route, args json.RawMessage, rec *auditApproval) error {
	c := &b.caller
	if c.Approver == nil {
		rec.Reason = "no approver"
		return errorf(CodeApprovalDenied, rt.name+" needs operator approval and no approver is available", nil)
	}
	actx, cancel := context.WithTimeout(ctx, b.r.approvalTimeout)
	defer cancel()
	deadline, _ := actx.Deadline()
	d, err := c.Approver.Approve(actx, ApprovalRequest{
		PID: c.PID, Tool: c.Tool, Route: rt.name, Capability: rt.auth.capability,
		Effect: rt.auth.effect, Args: append(json.RawMessage(nil), args...), Deadline: deadline,
	})
	if actx.Err() != nil { // a decision after the deadline is ignored
		rec.Reason = "no decision before the deadline"
		return errorf(CodeApprovalTimeout, rt.name+": no approval decision before the deadline", actx.Err())
	}
	if err != nil {
		rec.Reason = err.Error()
		return errorf(CodeApprovalDenied, rt.name+": approval failed: "+err.Error(), err)
	}
	rec.By, rec.Approved = d.By, d.Approved
	if !d.Approved {
		rec.Reason = d.Reason
		msg := rt.name + ": approval denied"
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		return errorf(CodeApprovalDenied, msg, nil)
	}
	return nil
}

// budgetCounter names the store counter behind a budget: "syscalls" for BudgetAll,
// "syscalls:kv" for an area, "syscalls:kv.put" for a route.
func budgetCounter(name string) string {
	if name == BudgetAll {
		return BudgetAll
	}
	return BudgetAll + ":" + name
}

// auditEvent is the data of one EventSyscall event.
type auditEvent struct {
	Route        string          `json:"route"`
	Tool         string          `json:"tool,omitempty"`
	CallID       string          `json:"call_id,omitempty"` // the tool call making the syscall
	Journal      *auditJournal   `json:"journal,omitempty"`
	Depth        int             `json:"depth"`
	Decision     string          `json:"decision"` // allowed | denied
	Stage        string          `json:"stage"`    // where it stopped: route, capability, args_size, approval, args, policy, data_flow, depth, budget, provider, result, result_size, done
	Code         string          `json:"code,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Cause        string          `json:"cause,omitempty"` // the host-side error behind a failure
	Capability   string          `json:"capability,omitempty"`
	Approval     *auditApproval  `json:"approval,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"` // kept whole when small
	ArgsBytes    int             `json:"args_bytes"`
	ArgsSHA256   string          `json:"args_sha256"`
	ResultSHA256 string          `json:"result_sha256,omitempty"`
	// Net is what a fetch did: method, host, path, status, sizes, the address
	// connected to, the names of the secrets sent. Never bodies or values.
	Net *auditNet `json:"net,omitempty"`
	// Labels are the data-flow labels this call's result carried.
	Labels         []string `json:"labels,omitempty"`
	DurationMicros int64    `json:"duration_us"`

	// argsValue is Args as the boundary decoded them, for doc.
	argsValue jsonexact.Value
}

// auditJournal names the journal entry of a syscall: its index in the call and the
// SHA-256 of its stored record, so that the hash chain covers the journal.
type auditJournal struct {
	Index     int    `json:"index"`
	SHA256    string `json:"sha256"`
	Truncated bool   `json:"truncated,omitempty"`
}

type auditApproval struct {
	Class    string `json:"class"`
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// maxAuditArgs is the largest argument text kept whole in an audit event; larger ones
// are kept as their digest and size.
const maxAuditArgs = 1024

func (ev *auditEvent) noteArgs(args json.RawMessage, in syscallArgs) {
	sum := sha256.Sum256(args)
	ev.ArgsSHA256 = hex.EncodeToString(sum[:])
	ev.ArgsBytes = len(args)
	// Only exact JSON is kept whole: the store refuses event data that is not, and a
	// refusal's audit event must not be lost with it.
	if len(args) > 0 && len(args) <= maxAuditArgs && in.err == nil {
		ev.Args = append(json.RawMessage(nil), args...)
		ev.argsValue = in.value
	}
}

// doc builds the event's data as a jsonexact.Doc, members in the order (and with the
// omissions) of its JSON tags, the arguments as the boundary decoded them: the store
// takes it without parsing it (store.Tx.AppendDoc).
func (ev *auditEvent) doc() (jsonexact.Doc, error) {
	ms := make([]jsonexact.Member, 0, 20)
	add := func(k string, v jsonexact.Value) { ms = append(ms, jsonexact.Member{Key: k, Val: v}) }
	str := func(k, s string) {
		if s != "" {
			add(k, jsonexact.Str(s))
		}
	}
	add("route", jsonexact.Str(ev.Route))
	str("tool", ev.Tool)
	str("call_id", ev.CallID)
	if j := ev.Journal; j != nil {
		jm := []jsonexact.Member{{Key: "index", Val: jsonexact.Int(int64(j.Index))}, {Key: "sha256", Val: jsonexact.Str(j.SHA256)}}
		if j.Truncated {
			jm = append(jm, jsonexact.Member{Key: "truncated", Val: jsonexact.Boolean(true)})
		}
		add("journal", jsonexact.Obj(jm...))
	}
	add("depth", jsonexact.Int(int64(ev.Depth)))
	add("decision", jsonexact.Str(ev.Decision))
	add("stage", jsonexact.Str(ev.Stage))
	str("code", ev.Code)
	str("reason", ev.Reason)
	str("cause", ev.Cause)
	str("capability", ev.Capability)
	if a := ev.Approval; a != nil {
		am := []jsonexact.Member{{Key: "class", Val: jsonexact.Str(a.Class)}, {Key: "approved", Val: jsonexact.Boolean(a.Approved)}}
		if a.By != "" {
			am = append(am, jsonexact.Member{Key: "by", Val: jsonexact.Str(a.By)})
		}
		if a.Reason != "" {
			am = append(am, jsonexact.Member{Key: "reason", Val: jsonexact.Str(a.Reason)})
		}
		add("approval", jsonexact.Obj(am...))
	}
	if len(ev.Args) > 0 {
		add("args", ev.argsValue)
	}
	add("args_bytes", jsonexact.Int(int64(ev.ArgsBytes)))
	add("args_sha256", jsonexact.Str(ev.ArgsSHA256))
	str("result_sha256", ev.ResultSHA256)
	if n := ev.Net; n != nil {
		nm := []jsonexact.Member{{Key: "method", Val: jsonexact.Str(n.Method)}, {Key: "host", Val: jsonexact.Str(n.Host)}, {Key: "path", Val: jsonexact.Str(n.Path)}}
		if n.Address != "" {
			nm = append(nm, jsonexact.Member{Key: "address", Val: jsonexact.Str(n.Address)})
		}
		if n.Status != 0 {
			nm = append(nm, jsonexact.Member{Key: "status", Val: jsonexact.Int(int64(n.Status))})
		}
		nm = append(nm, jsonexact.Member{Key: "request_bytes", Val: jsonexact.Int(int64(n.RequestBytes))},
			jsonexact.Member{Key: "response_bytes", Val: jsonexact.Int(n.ResponseBytes)})
		if n.Redirects != 0 {
			nm = append(nm, jsonexact.Member{Key: "redirects", Val: jsonexact.Int(int64(n.Redirects))})
		}
		if n.Secrets != "" {
			nm = append(nm, jsonexact.Member{Key: "secrets", Val: jsonexact.Str(n.Secrets)})
		}
		if len(n.Hops) > 0 {
			hops := make([]jsonexact.Value, len(n.Hops))
			for i, h := range n.Hops {
				hm := []jsonexact.Member{{Key: "method", Val: jsonexact.Str(h.Method)}, {Key: "host", Val: jsonexact.Str(h.Host)}, {Key: "path", Val: jsonexact.Str(h.Path)}}
				if h.Address != "" {
					hm = append(hm, jsonexact.Member{Key: "address", Val: jsonexact.Str(h.Address)})
				}
				if h.Status != 0 {
					hm = append(hm, jsonexact.Member{Key: "status", Val: jsonexact.Int(int64(h.Status))})
				}
				if h.Secrets != "" {
					hm = append(hm, jsonexact.Member{Key: "secrets", Val: jsonexact.Str(h.Secrets)})
				}
				hops[i] = jsonexact.Obj(hm...)
			}
			nm = append(nm, jsonexact.Member{Key: "hops", Val: jsonexact.Value{Kind: jsonexact.Array, A: hops}})
		}
		add("net", jsonexact.Obj(nm...))
	}
	if len(ev.Labels) > 0 {
		add("labels", jsonexact.Strs(ev.Labels))
	}
	add("duration_us", jsonexact.Int(ev.DurationMicros))
	// The arguments sit one level below the event's object.
	return jsonexact.Encode(jsonexact.Obj(ms...), jsonexact.DefaultMaxDepth+1)
}

// update writes fn's batch: synced, or deferred to the settlement of the caller's
// tool call when the caller says one follows.
func (b *Bound) update(ctx context.Context, fn func(tx *store.Tx) error) error {
	if b.caller.Deferred {
		return b.r.store.UpdateDeferred(ctx, fn)
	}
	return b.r.store.Update(ctx, fn)
}

// commit writes the provider's staged writes and the audit event as one atomic
// batch: either both are durable or neither is. It is synced, or, for a Deferred
// caller, durable with the call's synced settlement.
//
// A journal entry, when the call has a journal, is part of the same batch and its
// digest is part of the event, so the hash chain covers it: an entry exists exactly
// when its audit event does, and only with the result the provider returned.
func (b *Bound) commit(ctx context.Context, ev *auditEvent, writes []func(tx *store.Tx) error, entry *store.JournalEntry) error {
	// The event is written even when the call's context is done (a timeout is itself a
	// decision worth recording).
	return b.update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		for _, w := range writes {
			if err := w(tx); err != nil {
				return err
			}
		}
		if entry != nil {
			sum, err := tx.PutJournal(*entry)
			if err != nil {
				return err
			}
			ev.CallID = entry.CallID
			ev.Journal = &auditJournal{Index: entry.Index, SHA256: sum, Truncated: entry.Truncated}
		}
		data, err := ev.doc()
		if err != nil {
			return err
		}
		_, err = tx.AppendDoc(b.caller.PID, EventSyscall, data)
		return err
	})
}

// charge adds one to every applicable budget in one atomic write: all or none.
func (b *Bound) charge(ctx context.Context, limits map[string]int64) error {
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	sort.Strings(names)
	var exhausted string
	err := b.update(ctx, func(tx *store.Tx) error {
		for _, n := range names {
			if _, err := tx.Charge(b.caller.PID, budgetCounter(n), 1, limits[n]); err != nil {
				if errors.Is(err, store.ErrLimitExceeded) {
					exhausted = n
				}
				return err
			}
		}
		return nil
	})
	switch {
	case exhausted != "":
		return errorf(CodeBudgetExceeded, fmt.Sprintf("budget %s (%d calls) is spent", exhausted, limits[exhausted]), err)
	case err != nil:
		return errorf(CodeProviderFailed, "could not charge the budget", err)
	}
	return nil
}
