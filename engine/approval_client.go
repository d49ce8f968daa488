package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Approvals through the client of a call. The operator decides approvals with
// Approve and Deny; a client that can ask its human (MCP elicitation) may decide the
// approvals of its own calls instead. Its decision is the same durable record with
// the same events, and says who decided (DecidedBy: the client as it named itself).
// Nothing changes for a call whose context carries neither hook: it waits for the
// operator.

const (
	// CodeApprovalRequired: the call needs an approval that its client was asked
	// for; the client answers by retrying the call with the decision
	// (WithClientDecision). The approval stays pending, and the operator can still
	// decide it.
	CodeApprovalRequired Code = "approval_required"
	// CodeRequestStateInvalid: a client's answer to an approval cannot be taken: its
	// state was tampered with, it was already used, or it is bound to another
	// process, call, arguments or tool definition.
	CodeRequestStateInvalid Code = "request_state_invalid"
)

// ApprovalKindTool and ApprovalKindRoute are the kinds of Approval.Kind.
const (
	ApprovalKindTool  = approvalTool
	ApprovalKindRoute = approvalRoute
)

type askerKey struct{}
type decisionKey struct{}

// WithApprovalAsker returns ctx for a call whose client can be asked for the
// approvals the call needs. ask runs once an approval is pending and durable (never
// under a kernel lock); it returns true to let the call wait for the decision, which
// the asker arranges to make with DecideApproval (or the operator makes), or false
// to end the call now with approval_required, the client answering with a retry that
// carries WithClientDecision.
func WithApprovalAsker(ctx context.Context, ask func(Approval) (wait bool)) context.Context {
	return context.WithValue(ctx, askerKey{}, ask)
}

// ClientDecision is a client's answer to approval ApprovalID, brought back with the
// retry of the call that asked. ArgsSHA256 and DefinitionSHA256 are what the client
// was shown: the answer applies only to a call with exactly those.
type ClientDecision struct {
	ApprovalID       string
	ArgsSHA256       string
	DefinitionSHA256 string
	Approve          bool
	Reason           string
	// By names the client (its clientInfo), for DecidedBy and the audit log.
	By string
}

// WithClientDecision returns ctx for the retry of a call carrying the client's
// decision on the approval the call asked for.
func WithClientDecision(ctx context.Context, d ClientDecision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// DecideApproval records a decision on pending approval id made by by (a client, as
// it names itself), durably and with the same events as Approve and Deny; the call
// waiting on it proceeds or fails.
func (k *Kernel) DecideApproval(ctx context.Context, id string, approve bool, reason, by string) error {
	if by == "" || by == "operator" || by == "kernel" || by == "timeout" {
		return errorf(CodeInvalidConfig, "a client's decision names the client, not %q", by)
	}
	return k.decide(ctx, id, approve, reason, by)
}

// applyClientDecision takes the client's answer ctx carries, if any, for the call
// about to wait on an approval of sub: the answer must name a pending approval of
// this process asked for exactly this call (kind, subject, tool, arguments and tool
// definition, as the client was shown). A denial ends the call.
func (k *Kernel) applyClientDecision(ctx context.Context, p *process, sub approvalSubject, argsSum, defHash string) *Error {
	d, ok := ctx.Value(decisionKey{}).(ClientDecision)
	if !ok || sub.kind != approvalTool {
		// A client is asked (and answers by a retry) only for the approval of the tool
		// it calls; the syscalls that tool makes wait for decisions as they always do.
		return nil
	}
	invalid := func(format string, args ...any) *Error {
		return &Error{Layer: layer, Code: CodeRequestStateInvalid, Message: fmt.Sprintf(format, args...)}
	}
	r, err := k.st.Approval(p.pid, d.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return invalid("the answer names approval %q, which this process never asked for", d.ApprovalID)
	}
	if err != nil {
		return storageErr("read the approval", err)
	}
	a := approvalOf(r)
	switch {
	case a.Kind != sub.kind || a.Subject != sub.subject || a.Tool != sub.tool:
		return invalid("the answer to approval %s is for a call of %s, not of %s", a.ID, a.Subject, sub.subject)
	case d.ArgsSHA256 != a.ArgsSHA256 || a.ArgsSHA256 != argsSum:
		return invalid("the answer to approval %s was given for other arguments of %s (sha256 %s, this call's are %s)", a.ID, a.Tool, a.ArgsSHA256, argsSum)
	case d.DefinitionSHA256 != a.DefinitionSHA256 || a.DefinitionSHA256 != defHash:
		return invalid("the answer to approval %s was given for another definition of %s (sha256 %s, the current one is %s)", a.ID, a.Tool, a.DefinitionSHA256, defHash)
	case a.State != ApprovalPending:
		return invalid("approval %s is already %s: an answer counts once", a.ID, a.State)
	}
	if err := k.decideIn(ctx, p.pid, a.ID, d.Approve, d.Reason, d.By); err != nil {
		if e, ok := liberr.AsLayer(err, layer); ok {
			return e
		}
		return storageErr("decide the approval", err)
	}
	if !d.Approve {
		msg := fmt.Sprintf("approval %s was denied by %s", a.ID, d.By)
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		return &Error{Layer: layer, Code: CodeApprovalDenied, Message: msg}
	}
	return nil
}

// askClient hands pending approval a to the client's asker, if the call's context
// has one. It reports whether the call waits; false ends it with approval_required.
func askClient(ctx context.Context, a Approval) (wait bool, asked bool) {
	ask, ok := ctx.Value(askerKey{}).(func(Approval) bool)
	if !ok || ask == nil {
		return true, false
	}
	return ask(a), true
}

// Secret is the store's secret named name (256 random bits, made on first use and
// kept): what a server authenticates the state it hands its clients with. It never
// reaches a process, an event or a result.
func (k *Kernel) Secret(ctx context.Context, name string) ([]byte, error) {
	b, err := k.st.Secret(ctx, name)
	if err != nil {
		return nil, storageErr("read the secret "+name, err)
	}
	return b, nil
}
