package syscalls

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PolicySlot names one typed part of an image's route policy. A route declares the
// slots it reads in the table (declare(...).governedBy(..., SlotNet)), so docs,
// `libos syscalls`, `libos images` and the table test know which image field governs
// which route; CompilePolicy gives a route only the slots it declares, and refuses an
// image that fills a slot for a route that does not read it.
type PolicySlot string

// The slots. Each is one field of PolicySpec; Field says where the image manifest
// holds it.
const (
	// SlotApproval raises a route to operator approval (approvals.routes): by route,
	// area ("kv") or side-effect class ("read", "write"). It can only raise: the
	// table's own operator class always stands.
	SlotApproval PolicySlot = "approval"
	// SlotBudget is the most calls of a route the process may ever make
	// (limits.syscall_budgets): by route, area, or BudgetAll for every route.
	SlotBudget PolicySlot = "budget"
	// SlotSize bounds the bytes of a route's arguments (as the code sent them) and of
	// its result (limits.syscall_sizes): by route, area, or BudgetAll for every route
	// that reads it; the tightest bound that applies wins. Over it the call fails with
	// limit_exceeded, audited at stage args_size or result_size.
	SlotSize PolicySlot = "size"
	// SlotNet is the egress allow-list: hosts, methods, sizes, time, redirects and the
	// exact non-public addresses a fetch may reach.
	SlotNet PolicySlot = "net"
	// SlotSecrets are the secrets a fetch may send by reference, and to which hosts.
	SlotSecrets PolicySlot = "secrets"
	// SlotLabels are the data-flow sources: kv key patterns and fetch hosts whose data
	// carries a label.
	SlotLabels PolicySlot = "labels"
	// SlotDataFlow are the rules saying which labels may reach which sinks.
	SlotDataFlow PolicySlot = "data_flow"
)

// slotFields are where each slot lives in the image manifest, as a JSON pointer.
var slotFields = map[PolicySlot]string{
	SlotApproval: "/approvals/routes",
	SlotBudget:   "/limits/syscall_budgets",
	SlotSize:     "/limits/syscall_sizes",
	SlotNet:      "/net",
	SlotSecrets:  "/secrets",
	SlotLabels:   "/labels",
	SlotDataFlow: "/data_flow",
}

// Slots lists every slot, in the order docs show them.
func Slots() []PolicySlot {
	return []PolicySlot{SlotApproval, SlotBudget, SlotSize, SlotNet, SlotSecrets, SlotLabels, SlotDataFlow}
}

// Field is where the image manifest holds the slot, as a JSON pointer
// ("/limits/syscall_sizes").
func (s PolicySlot) Field() string { return slotFields[s] }

// FieldName is Field as a reader of the manifest names it: "limits.syscall_sizes".
func (s PolicySlot) FieldName() string {
	return strings.ReplaceAll(strings.TrimPrefix(slotFields[s], "/"), "/", ".")
}

// PolicySpec is the route policy as an image writes it, one field per slot (its slot
// tag). Net, Secrets, Labels, DataFlow and ExternalTools are top-level fields of the
// manifest; the per-route maps (RouteApprovals, RouteBudgets, RouteSizes) are nested
// elsewhere in it (PolicySlot.Field), so they are no part of this type's JSON: the
// image fills them from their own fields. The zero value grants no egress, no secret,
// no label and no rule (every fetch is refused), raises no route, and sets no budget
// and no size bound. CompilePolicy checks it, every problem at once.
type PolicySpec struct {
	Net     *NetSpec              `json:"net,omitempty" slot:"net"`
	Secrets map[string]SecretSpec `json:"secrets,omitempty" slot:"secrets"`
	Labels  *LabelSpec            `json:"labels,omitempty" slot:"labels"`
	// DataFlow says which labels may reach which sinks; a label no rule names flows
	// anywhere (and is still carried).
	DataFlow []FlowRule `json:"data_flow,omitempty" slot:"data_flow"`
	// ExternalTools are tools of the image that send what they get outside the
	// process; tools.call into one is a data-flow sink.
	ExternalTools []string `json:"external_tools,omitempty" slot:"data_flow"`

	// RouteApprovals maps a route, an area or a side-effect class (read, write) to its
	// approval class (SlotApproval).
	RouteApprovals map[string]ApprovalClass `json:"-" slot:"approval"`
	// RouteBudgets maps BudgetAll, an area or a route to the most calls the process
	// may ever make (SlotBudget); 0 allows none.
	RouteBudgets map[string]int64 `json:"-" slot:"budget"`
	// RouteSizes maps BudgetAll, an area or a route to a size bound (SlotSize).
	RouteSizes map[string]SizeBound `json:"-" slot:"size"`
}

// SizeBound bounds one route's arguments and result, in bytes of JSON text: the
// arguments as the code sent them, the result as the provider returned it. A zero
// field sets no bound; a bound only adds to the table's own limits (schemas, kv value
// size, the net slot's body sizes), it never raises one.
type SizeBound struct {
	MaxArgsBytes   int64 `json:"max_args_bytes,omitempty"`
	MaxResultBytes int64 `json:"max_result_bytes,omitempty"`
}

// MaxSizeBound is the largest size bound an image may set.
const MaxSizeBound = 16 << 20

// NetSpec grants egress. Hosts are host names or IP literals, optionally with a port
// ("api.example.com", "*.corp.example:8443", "127.0.0.1:8080", "[::1]:9000"). Without a
// port a host is allowed on its scheme's default port only (80, 443). "*.suffix" allows
// every name below suffix, never suffix itself.
type NetSpec struct {
	Allow []string `json:"allow"`
	// Methods are the HTTP methods allowed (upper case); empty means GET and HEAD.
	Methods []string `json:"methods,omitempty"`
	// MaxRequestBytes bounds a request body; zero means DefaultMaxRequestBytes.
	MaxRequestBytes int64 `json:"max_request_bytes,omitempty"`
	// MaxResponseBytes bounds a response body; zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// Timeout bounds one fetch, redirects included ("5s", "500ms"); empty means
	// DefaultFetchTimeout. The call's own time limit bounds it too.
	Timeout string `json:"timeout,omitempty"`
	// MaxRedirects is how many redirects a fetch follows (each to an allowed host);
	// nil means DefaultMaxRedirects, 0 follows none.
	MaxRedirects *int `json:"max_redirects,omitempty"`
	// AllowAddresses are the exact non-public addresses (loopback, private, link-local,
	// CGNAT, metadata, …) a fetch may connect to. Every other such address is refused
	// after name resolution, whatever the host's name. The unspecified addresses
	// (0.0.0.0/8, ::) and the IPv6 forms of IPv4 that are refused outright
	// (IPv4-compatible, SIIT, Teredo) cannot be named.
	AllowAddresses []string `json:"allow_addresses,omitempty"`
}

// SecretSpec is one secret: where its value is read from on the host (exactly one of
// FromEnv and FromFile) and the hosts it may be sent to. FromFile is an absolute path
// to a regular file of at most MaxSecretFileBytes (a FIFO or a device is refused),
// read each time the secret is sent, its trailing line end dropped.
type SecretSpec struct {
	FromEnv  string   `json:"from_env,omitempty"`
	FromFile string   `json:"from_file,omitempty"`
	Hosts    []string `json:"hosts"`
}

// LabelSpec maps data sources to labels. A kv pattern is an exact key, or a prefix
// ending in "*" ("hr/*"); a net pattern is a host as in NetSpec.Allow.
type LabelSpec struct {
	KV  map[string]string `json:"kv,omitempty"`
	Net map[string]string `json:"net,omitempty"`
}

// FlowRule says where data carrying Label may go. Deny names sinks that refuse it
// outright; AllowHosts, when set, limits net.fetch to those hosts.
type FlowRule struct {
	Label      string   `json:"label"`
	Deny       []string `json:"deny,omitempty"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
}

// The data-flow sinks a rule can name.
const (
	SinkNetFetch  = "net.fetch"
	SinkKVPut     = "kv.put"
	SinkToolsCall = "tools.call"
	SinkModel     = "model"
	// SinkExport is a tape exported from a call's journal (libos tape): a copy of the
	// call's values that leaves the process, where no sink is checked again.
	SinkExport = "export"
)

var sinks = map[string]string{
	SinkNetFetch:  "any fetch",
	SinkKVPut:     "a kv key whose own labels do not include it",
	SinkToolsCall: "a tool the image marks external",
	SinkModel:     "the tool's result returned to the model",
	SinkExport:    "a tape exported from the journal (libos tape)",
}

// Defaults and bounds of NetSpec.
const (
	DefaultMaxRequestBytes  = 256 << 10
	DefaultMaxResponseBytes = 1 << 20
	MaxResponseBytesBound   = 16 << 20
	DefaultFetchTimeout     = 10 * time.Second
	MaxFetchTimeout         = 10 * time.Minute
	DefaultMaxRedirects     = 3
	MaxRedirectsBound       = 10
)

// PolicyProblem is one finding of CompilePolicy: At is a JSON pointer into the
// manifest ("/net/allow/2").
type PolicyProblem struct {
	At      string
	Message string
}

// Policy is a checked, compiled PolicySpec: what the router consults. A nil *Policy is
// the zero policy (no egress, no labels).
type Policy struct {
	spec     PolicySpec
	net      *netPolicy
	secrets  map[string]*secret
	kv       []kvLabel
	hosts    []hostLabel
	rules    map[string]*flowRule
	external map[string]bool
	// routes holds, by route name, what the per-route slots say of the route; a
	// route the image says nothing of has no entry.
	routes map[string]*routePolicy
}

// routePolicy is what the approval, budget and size slots say of one route.
type routePolicy struct {
	operator  bool
	budgets   map[string]int64 // budget name (BudgetAll, area, route) → most calls
	maxArgs   int64            // 0: no bound
	maxResult int64
}

type netPolicy struct {
	allow        []hostPattern
	methods      map[string]bool
	maxRequest   int64
	maxResponse  int64
	timeout      time.Duration
	maxRedirects int
	addresses    map[string]bool // canonical IP text
}

type secret struct {
	name     string
	fromEnv  string
	fromFile string
	hosts    []hostPattern
}

type kvLabel struct {
	pattern string
	prefix  bool
	label   string
}

type hostLabel struct {
	host  hostPattern
	label string
}

type flowRule struct {
	deny       map[string]bool
	allowHosts []hostPattern // nil: no host restriction
}

var (
	secretName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`) })
	labelName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })
	envName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })
	methodName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z]{1,16}$`) })
)

// Clone returns a deep copy.
func (s PolicySpec) Clone() PolicySpec {
	c := s
	if s.Net != nil {
		n := *s.Net
		n.Allow = slices.Clone(s.Net.Allow)
		n.Methods = slices.Clone(s.Net.Methods)
		n.AllowAddresses = slices.Clone(s.Net.AllowAddresses)
		if s.Net.MaxRedirects != nil {
			r := *s.Net.MaxRedirects
			n.MaxRedirects = &r
		}
		c.Net = &n
	}
	if s.Secrets != nil {
		c.Secrets = make(map[string]SecretSpec, len(s.Secrets))
		for k, v := range s.Secrets {
			v.Hosts = slices.Clone(v.Hosts)
			c.Secrets[k] = v
		}
	}
	if s.Labels != nil {
		l := LabelSpec{KV: maps.Clone(s.Labels.KV), Net: maps.Clone(s.Labels.Net)}
		c.Labels = &l
	}
	if s.DataFlow != nil {
		c.DataFlow = make([]FlowRule, len(s.DataFlow))
		for i, r := range s.DataFlow {
			r.Deny, r.AllowHosts = slices.Clone(r.Deny), slices.Clone(r.AllowHosts)
			c.DataFlow[i] = r
		}
	}
	c.ExternalTools = slices.Clone(s.ExternalTools)
	c.RouteApprovals = maps.Clone(s.RouteApprovals)
	c.RouteBudgets = maps.Clone(s.RouteBudgets)
	c.RouteSizes = maps.Clone(s.RouteSizes)
	return c
}

// Spec returns the policy as the image wrote it.
func (p *Policy) Spec() PolicySpec {
	if p == nil {
		return PolicySpec{}
	}
	return p.spec
}

// CompilePolicy checks spec and compiles it. Every problem is listed, with its place in
// the manifest; the policy is nil when there is any.
func CompilePolicy(spec PolicySpec) (*Policy, []PolicyProblem) {
	rs, err := routes()
	return compilePolicy(spec, rs, err)
}

// compilePolicy is CompilePolicy against route table rs (compiled, or the error that
// kept it from compiling).
func compilePolicy(spec PolicySpec, rs map[string]*route, rsErr error) (*Policy, []PolicyProblem) {
	var ps []PolicyProblem
	add := func(at, format string, args ...any) {
		ps = append(ps, PolicyProblem{At: at, Message: fmt.Sprintf(format, args...)})
	}
	p := &Policy{spec: spec, secrets: map[string]*secret{}, rules: map[string]*flowRule{}, external: map[string]bool{}}

	hosts := func(at string, list []string) []hostPattern {
		out := make([]hostPattern, 0, len(list))
		seen := map[string]bool{}
		for i, h := range list {
			hp, err := parseHostPattern(h)
			if err != nil {
				add(at+"/"+strconv.Itoa(i), "%v", err)
				continue
			}
			if seen[hp.String()] {
				add(at+"/"+strconv.Itoa(i), "host %q is listed twice", hp.String())
				continue
			}
			seen[hp.String()] = true
			out = append(out, hp)
		}
		return out
	}

	if n := spec.Net; n != nil {
		np := &netPolicy{methods: map[string]bool{}, addresses: map[string]bool{}}
		np.allow = hosts("/net/allow", n.Allow)
		if len(n.Allow) == 0 {
			add("/net/allow", "net needs at least one allowed host (leave net out to refuse every fetch)")
		}
		methods := n.Methods
		if len(methods) == 0 {
			methods = []string{"GET", "HEAD"}
		}
		for i, m := range methods {
			if !methodName().MatchString(m) {
				add("/net/methods/"+strconv.Itoa(i), "method %q is not an upper-case HTTP method", m)
				continue
			}
			if m == "CONNECT" || m == "TRACE" {
				add("/net/methods/"+strconv.Itoa(i), "method %s is never allowed", m)
				continue
			}
			np.methods[m] = true
		}
		np.maxRequest = bound(add, "/net/max_request_bytes", n.MaxRequestBytes, DefaultMaxRequestBytes, MaxResponseBytesBound)
		np.maxResponse = bound(add, "/net/max_response_bytes", n.MaxResponseBytes, DefaultMaxResponseBytes, MaxResponseBytesBound)
		np.timeout = DefaultFetchTimeout
		if n.Timeout != "" {
			d, err := time.ParseDuration(n.Timeout)
			switch {
			case err != nil:
				add("/net/timeout", "timeout %q is not a duration such as \"5s\" or \"500ms\"", n.Timeout)
			case d <= 0 || d > MaxFetchTimeout:
				add("/net/timeout", "timeout %s is not in (0, %s]", d, MaxFetchTimeout)
			default:
				np.timeout = d
			}
		}
		np.maxRedirects = DefaultMaxRedirects
		if n.MaxRedirects != nil {
			if r := *n.MaxRedirects; r < 0 || r > MaxRedirectsBound {
				add("/net/max_redirects", "max_redirects %d is not in [0, %d]", r, MaxRedirectsBound)
			} else {
				np.maxRedirects = r
			}
		}
		for i, a := range n.AllowAddresses {
			ip, err := parseExactAddress(a)
			if err != nil {
				add("/net/allow_addresses/"+strconv.Itoa(i), "%v", err)
				continue
			}
			np.addresses[ip.String()] = true
		}
		p.net = np
	}

	for _, name := range sortedNames(spec.Secrets) {
		s := spec.Secrets[name]
		at := "/secrets/" + escape(name)
		if !secretName().MatchString(name) {
			add(at, "secret name %q must match %s", name, secretName())
		}
		switch {
		case s.FromEnv != "" && s.FromFile != "":
			add(at, "a secret has one source: from_env or from_file, not both")
		case s.FromEnv == "" && s.FromFile == "":
			add(at, "a secret needs a source: from_env or from_file")
		case s.FromEnv != "" && !envName().MatchString(s.FromEnv):
			add(at+"/from_env", "%q is not an environment variable name", s.FromEnv)
		case s.FromFile != "" && !strings.HasPrefix(s.FromFile, "/"):
			add(at+"/from_file", "from_file must be an absolute path, not %q", s.FromFile)
		}
		if len(s.Hosts) == 0 {
			add(at+"/hosts", "a secret needs the hosts it may be sent to")
		}
		sec := &secret{name: name, fromEnv: s.FromEnv, fromFile: s.FromFile, hosts: hosts(at+"/hosts", s.Hosts)}
		for i, h := range sec.hosts {
			if p.net == nil || !coveredBy(h, p.net.allow) {
				add(at+"/hosts/"+strconv.Itoa(i), "secret %s may go to %s, which net.allow does not grant: it could never be sent", name, h)
			}
		}
		p.secrets[name] = sec
	}

	labels := map[string]bool{}
	label := func(at, l string) {
		if !labelName().MatchString(l) {
			add(at, "label %q must match %s", l, labelName())
			return
		}
		labels[l] = true
	}
	if l := spec.Labels; l != nil {
		for _, pat := range sortedNames(l.KV) {
			at := "/labels/kv/" + escape(pat)
			label(at, l.KV[pat])
			kl := kvLabel{pattern: pat, label: l.KV[pat]}
			if base, ok := strings.CutSuffix(pat, "*"); ok {
				kl.pattern, kl.prefix = base, true
			}
			if strings.Contains(kl.pattern, "*") {
				add(at, "a kv pattern is an exact key or a prefix ending in one \"*\": %q", pat)
				continue
			}
			if len(kl.pattern) > MaxKVKeyBytes || (!kl.prefix && kl.pattern == "") {
				add(at, "kv pattern %q is not a key or key prefix", pat)
				continue
			}
			p.kv = append(p.kv, kl)
		}
		for _, h := range sortedNames(l.Net) {
			at := "/labels/net/" + escape(h)
			label(at, l.Net[h])
			hp, err := parseHostPattern(h)
			if err != nil {
				add(at, "%v", err)
				continue
			}
			p.hosts = append(p.hosts, hostLabel{host: hp, label: l.Net[h]})
		}
	}
	for i, r := range spec.DataFlow {
		at := "/data_flow/" + strconv.Itoa(i)
		if !labels[r.Label] {
			add(at+"/label", "label %q is given by no kv or net label source (a rule for it would never apply)", r.Label)
		}
		if _, dup := p.rules[r.Label]; dup {
			add(at+"/label", "label %q has two rules; give it one", r.Label)
			continue
		}
		fr := &flowRule{deny: map[string]bool{}}
		for j, s := range r.Deny {
			if _, ok := sinks[s]; !ok {
				add(at+"/deny/"+strconv.Itoa(j), "%q is not a sink (net.fetch, kv.put, tools.call, model, export)", s)
				continue
			}
			fr.deny[s] = true
		}
		if r.AllowHosts != nil {
			if fr.deny[SinkNetFetch] {
				add(at+"/allow_hosts", "allow_hosts and deny net.fetch contradict each other")
			}
			fr.allowHosts = hosts(at+"/allow_hosts", r.AllowHosts)
		}
		if len(r.Deny) == 0 && r.AllowHosts == nil {
			add(at, "a rule needs deny or allow_hosts")
		}
		p.rules[r.Label] = fr
	}
	for _, t := range spec.ExternalTools {
		p.external[t] = true
	}
	if rsErr != nil {
		add("", "the route table does not compile: %v", rsErr)
	} else {
		p.routes = compileRouteSlots(spec, rs, add)
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return p, nil
}

func bound(add func(string, string, ...any), at string, v, def, most int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0 || v > most:
		add(at, "%d is not in [1, %d]", v, most)
		return def
	}
	return v
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// escape writes a map key as a JSON pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// coveredBy reports whether every host h matches is matched by one of allow.
func coveredBy(h hostPattern, allow []hostPattern) bool {
	for _, a := range allow {
		if a.covers(h) {
			return true
		}
	}
	return false
}

// Explain describes the policy in words, one line per rule, for `libos images` and
// the operator.
func (p *Policy) Explain() []string {
	if p == nil || p.net == nil {
		return []string{"egress: none (net.fetch is refused for every host)"}
	}
	var out []string
	n := p.net
	var hs []string
	for _, h := range n.allow {
		hs = append(hs, h.String())
	}
	var ms []string
	for m := range n.methods {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	out = append(out, fmt.Sprintf("egress: net.fetch may reach %s, with %s", strings.Join(hs, ", "), strings.Join(ms, ", ")))
	out = append(out, fmt.Sprintf("egress: requests up to %d bytes, responses up to %d bytes, %s per fetch, at most %d redirects (each to an allowed host)",
		n.maxRequest, n.maxResponse, n.timeout, n.maxRedirects))
	if len(n.addresses) == 0 {
		out = append(out, "egress: loopback, private, link-local, CGNAT and metadata addresses are refused after name resolution")
	} else {
		as := sortedNames(n.addresses)
		out = append(out, "egress: of the non-public addresses, only "+strings.Join(as, ", ")+" may be connected to; the others are refused after name resolution")
	}
	for _, name := range sortedNames(p.secrets) {
		s := p.secrets[name]
		var hs []string
		for _, h := range s.hosts {
			hs = append(hs, h.String())
		}
		src := "environment variable " + s.fromEnv
		if s.fromFile != "" {
			src = "file " + s.fromFile
		}
		out = append(out, fmt.Sprintf("secret %s: read on the host from %s; {{secret:%s}} in a header is replaced only for %s; the guest never sees the value",
			name, src, name, strings.Join(hs, ", ")))
	}
	return out
}

// ExplainDataFlow describes labels and rules in words.
func (p *Policy) ExplainDataFlow() []string {
	if p == nil || (len(p.kv) == 0 && len(p.hosts) == 0) {
		return []string{"data flow: no labels (nothing is tracked)"}
	}
	var out []string
	for _, k := range p.kv {
		what := "key " + strconv.Quote(k.pattern)
		if k.prefix {
			what = "keys starting with " + strconv.Quote(k.pattern)
		}
		out = append(out, fmt.Sprintf("label %s: kv %s", k.label, what))
	}
	for _, h := range p.hosts {
		out = append(out, fmt.Sprintf("label %s: responses from %s", h.label, h.host))
	}
	for _, l := range sortedNames(p.rules) {
		r := p.rules[l]
		var parts []string
		for _, s := range sortedNames(r.deny) {
			parts = append(parts, "never reaches "+sinks[s]+" ("+s+")")
		}
		if r.allowHosts != nil {
			var hs []string
			for _, h := range r.allowHosts {
				hs = append(hs, h.String())
			}
			parts = append(parts, "may be sent out by net.fetch only to "+strings.Join(hs, ", "))
		}
		out = append(out, fmt.Sprintf("rule %s: once a call has seen it, it %s", l, strings.Join(parts, "; ")))
	}
	if len(p.external) > 0 {
		out = append(out, "external tools: "+strings.Join(sortedNames(p.external), ", "))
	}
	return out
}
