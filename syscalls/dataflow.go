package syscalls

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Data flow. The guest is opaque: the router cannot see which bytes of what a program
// sends came from which result it received. So taint is per call: once any syscall of
// a tool call has returned a labelled value, everything that call sends afterwards
// carries that label. A tools.call shares its caller's taint both ways: the called
// tool starts with the caller's labels, and what it sees is seen by the caller, who
// gets its result. See RATIONALE.md for what this guarantees and what it does not.

// taint is the set of labels a call tree has observed. It only grows.
type taint struct {
	mu     sync.Mutex
	labels map[string]bool
}

func (t *taint) add(labels []string) {
	if len(labels) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.labels == nil {
		t.labels = map[string]bool{}
	}
	for _, l := range labels {
		t.labels[l] = true
	}
}

func (t *taint) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.labels))
	for l := range t.labels {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

type taintKey struct{}

// taintOf is the taint of the call tree ctx belongs to: the one a tools.call above
// handed down, else this call's own.
func (b *Bound) taintOf(ctx context.Context) *taint {
	if t, ok := ctx.Value(taintKey{}).(*taint); ok {
		return t
	}
	return &b.taint
}

// Labels returns the data-flow labels the call (with every call it made or that made
// it through tools.call) has observed so far, sorted. A call that observed none
// returns nil: its results hold no labelled data, as far as the router can tell. The
// journal and tape export ask this before they copy a call's values anywhere.
func (b *Bound) Labels(ctx context.Context) []string {
	l := b.taintOf(ctx).list()
	if len(l) == 0 {
		return nil
	}
	return l
}

// noteLabels adds labels a result carries to the call's taint and its audit event.
func (c *call) noteLabels(labels []string) {
	if len(labels) == 0 {
		return
	}
	c.taint.add(labels)
	seen := map[string]bool{}
	for _, l := range c.ev.Labels {
		seen[l] = true
	}
	for _, l := range labels {
		if !seen[l] {
			seen[l] = true
			c.ev.Labels = append(c.ev.Labels, l)
		}
	}
	sort.Strings(c.ev.Labels)
}

func flowDenied(label, sink, detail string) *Error {
	return errorf(CodeDataFlowDenied, fmt.Sprintf("data flow: this call has seen data labelled %s, which may not reach %s%s", label, sink, detail), nil)
}

// flowTo checks the call's labels against one sink. host is set for net.fetch.
func (p *Policy) flowTo(labels []string, sink string, host *target) *Error {
	if p == nil {
		return nil
	}
	for _, l := range labels {
		r, ok := p.rules[l]
		if !ok {
			continue
		}
		if r.deny[sink] {
			detail := ""
			if host != nil {
				detail = " (" + host.authority() + ")"
			}
			return flowDenied(l, sink, detail)
		}
		if sink == SinkNetFetch && r.allowHosts != nil && !hostAllowed(r.allowHosts, *host) {
			return flowDenied(l, sink, " at "+host.authority()+" (allowed hosts for it: "+patterns(r.allowHosts)+")")
		}
	}
	return nil
}

// ExportForbidden returns the first of labels that the image's rules keep from an
// exported tape, and whether there is one. An exported tape copies a call's arguments,
// results and syscall values out of the process, where no sink is checked again, so a
// label may be exported only when no rule names it: any rule (a deny of any sink, an
// allow_hosts) restricts where the data may go, and a file goes anywhere. A rule that
// restricts nothing but export says deny: [export]. A nil Policy has no rules.
func (p *Policy) ExportForbidden(labels []string) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, l := range labels {
		if _, ok := p.rules[l]; ok {
			return l, true
		}
	}
	return "", false
}

func patterns(ps []hostPattern) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// hostLabels are the labels of what a host returns.
func (p *Policy) hostLabels(t target) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, h := range p.hosts {
		if h.host.matches(t.host, t.port, t.scheme) {
			out = append(out, h.label)
		}
	}
	return out
}

// kvLabels are the labels of a kv key's namespace.
func (p *Policy) kvLabels(key string) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, k := range p.kv {
		if k.prefix && strings.HasPrefix(key, k.pattern) || !k.prefix && key == k.pattern {
			out = append(out, k.label)
		}
	}
	return out
}

// flowToHost is net.fetch's sink check for one destination (the first, and every
// redirect's).
func (c *call) flowToHost(t target) error {
	if err := c.caller.Policy.flowTo(c.taint.list(), SinkNetFetch, &t); err != nil {
		return err
	}
	return nil
}

// flowFetch is net.fetch's data-flow stage: the first destination.
func flowFetch(c *call) error { return c.flowToHost(c.fetch.first) }

// flowKVPut refuses a value whose labels the key's namespace does not carry, when a
// rule forbids kv.put for such a label. Labels always travel with the value (see
// runKVPut), so a write that is allowed loses nothing.
func flowKVPut(c *call) error {
	pol := c.caller.Policy
	key := c.str("key")
	own := map[string]bool{}
	for _, l := range pol.kvLabels(key) {
		own[l] = true
	}
	var lower []string
	for _, l := range c.taint.list() {
		if !own[l] {
			lower = append(lower, l)
		}
	}
	if err := pol.flowTo(lower, SinkKVPut, nil); err != nil {
		err.Message += fmt.Sprintf(" (key %q is not labelled with it)", liberr.Clip(key, 64))
		return err
	}
	return nil
}

// flowToolsCall refuses a call into an external tool when a rule forbids it for one
// of the call's labels. Calls into other tools carry the labels along instead.
func flowToolsCall(c *call) error {
	pol := c.caller.Policy
	tool := c.str("tool")
	if pol == nil || !pol.external[tool] {
		return nil
	}
	if err := pol.flowTo(c.taint.list(), SinkToolsCall, nil); err != nil {
		err.Message += fmt.Sprintf(" (%s is an external tool)", tool)
		return err
	}
	return nil
}

// EventDataFlow is the type of the audit event of a data-flow decision at the model
// sink: a tool call that carries labels returning its result to the model.
const EventDataFlow = "data_flow"

// CheckResult is the model sink: a tool call at depth 0 is about to return its result
// to the model. When the call carries labels, the decision (allowed, or denied with
// data_flow_denied naming the label) is one audit event; a call without labels
// records nothing. Deeper calls return to the calling tool, which shares their taint,
// so nothing is decided for them.
func (b *Bound) CheckResult(ctx context.Context) error {
	if b.caller.Depth > 0 {
		return nil
	}
	labels := b.Labels(ctx)
	if len(labels) == 0 {
		return nil
	}
	err := b.caller.Policy.flowTo(labels, SinkModel, nil)
	ev := struct {
		Tool     string   `json:"tool,omitempty"`
		Sink     string   `json:"sink"`
		Labels   []string `json:"labels"`
		Decision string   `json:"decision"`
		Code     string   `json:"code,omitempty"`
		Reason   string   `json:"reason,omitempty"`
	}{Tool: b.caller.Tool, Sink: SinkModel, Labels: labels, Decision: "allowed"}
	if err != nil {
		ev.Decision, ev.Code, ev.Reason = "denied", string(err.Code), reason(err)
	}
	data, merr := json.Marshal(ev)
	if merr != nil {
		return errorf(CodeAuditFailed, "could not record the data-flow decision", merr)
	}
	if aerr := b.update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		_, err := tx.Append(b.caller.PID, EventDataFlow, data)
		return err
	}); aerr != nil {
		return errorf(CodeAuditFailed, "could not record the data-flow decision; the result is withheld", aerr)
	}
	if err != nil {
		return err
	}
	return nil
}
