package syscalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openStore(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open("/libos", store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRouter(t testing.TB, cfg RouterConfig) (*Router, *store.Store) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = openStore(t)
	}
	if cfg.Clock == nil {
		cfg.Clock = FixedClock(fixedNow)
	}
	r, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, cfg.Store
}

// lastAudit returns the data of the newest syscall event of pid.
func lastAudit(t testing.TB, s *store.Store, pid string) auditEvent {
	t.Helper()
	evs, err := s.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == EventSyscall {
			var ev auditEvent
			if err := json.Unmarshal(evs[i].Data, &ev); err != nil {
				t.Fatal(err)
			}
			return ev
		}
	}
	t.Fatalf("no %s event for %s", EventSyscall, pid)
	return auditEvent{}
}

func auditCount(t testing.TB, s *store.Store, pid string) int {
	t.Helper()
	h, err := s.Head(pid)
	if err != nil {
		t.Fatal(err)
	}
	return int(h.Seq)
}

func codeOf(err error) string {
	var se *Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

// codedErr stands for the engine's errors, which expose their code by ErrorCode.
type codedErr struct{ code string }

func (e codedErr) Error() string     { return "engine: " + e.code }
func (e codedErr) ErrorCode() string { return e.code }

// echoTools is a tool table of two real tools: echo returns its arguments, and
// recurse calls tools.call on itself through the router, as a JIT tool would.
type echoTools struct {
	r    *Router
	caps CapabilitySet
}

func (e *echoTools) CallTool(ctx context.Context, pid, tool string, args json.RawMessage, depth int) (json.RawMessage, error) {
	switch tool {
	case "echo":
		return args, nil
	case "recurse":
		b := e.r.For(Caller{PID: pid, Tool: tool, Capabilities: e.caps, Tools: e, Depth: depth})
		return b.Syscall(ctx, "tools.call", json.RawMessage(`{"tool":"recurse","arguments":{}}`))
	case "refuses":
		return nil, &Error{Code: "schema_invalid", Message: "engine: arguments do not match the input schema"}
	case "coded":
		return nil, fmt.Errorf("tools.call: %w", codedErr{"unknown_tool"})
	}
	return nil, fmt.Errorf("engine: no tool %q", tool)
}

// TestRouterEveryRoute is the table of every route and every outcome: for every route, a valid call, invalid
// arguments, a missing capability, approval approve/deny/timeout and budget
// exhaustion, each asserting the code and that an audit event was written.
func TestRouterEveryRoute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }))
	defer srv.Close()
	base := func() PolicySpec {
		return PolicySpec{Net: &NetSpec{Allow: []string{srv.Listener.Addr().String()}, AllowAddresses: []string{"127.0.0.1"}}}
	}
	valid := map[string]string{
		"net.fetch":  `{"url":"` + srv.URL + `/x"}`,
		"clock.now":  `{"timezone":"UTC"}`,
		"kv.get":     `{"key":"k"}`,
		"kv.put":     `{"key":"k","value":{"n":1}}`,
		"kv.delete":  `{"key":"k"}`,
		"kv.list":    `{"prefix":"","limit":10,"cursor":null}`,
		"tools.call": `{"tool":"echo","arguments":{"a":1}}`,
	}
	invalid := map[string]string{
		"net.fetch":  `{"url":7}`,
		"clock.now":  `{"tz":"UTC"}`,
		"kv.get":     `{"key":""}`,
		"kv.put":     `{"key":"k"}`,
		"kv.delete":  `{"key":7}`,
		"kv.list":    `{"limit":0}`,
		"tools.call": `{"tool":"echo"}`,
	}
	for _, rt := range Routes() {
		if valid[rt.Name] == "" || invalid[rt.Name] == "" {
			t.Fatalf("route %s has no test arguments: every route must be covered", rt.Name)
		}
	}
	blockUntilDone := ApproverFunc(func(ctx context.Context, _ ApprovalRequest) (Decision, error) {
		<-ctx.Done()
		return Decision{}, ctx.Err()
	})
	type variant struct {
		rule   string
		caller func(c *Caller)
		// spec fills the image's policy slots for the route; slot is the one it
		// needs the route to declare ("" for none).
		spec     func(s *PolicySpec, route string)
		slot     PolicySlot
		args     func(route string) string
		calls    int // the last call is checked; earlier ones must succeed
		want     string
		stage    string
		approval *auditApproval
	}
	variants := []variant{
		{rule: "a valid call with the capability held is allowed", want: "", stage: "done"},
		{rule: "argument validation against the route schema: argument_invalid",
			args: func(r string) string { return invalid[r] }, want: CodeArgumentInvalid, stage: "args"},
		{rule: "capability (held by the calling process): capability_denied",
			caller: func(c *Caller) { c.Capabilities = NewCapSet() }, want: CodeCapabilityDenied, stage: "capability"},
		{rule: "approval class operator, approved by policy",
			caller: func(c *Caller) { c.Approver = AutoApprove() },
			want:   "", stage: "done", approval: &auditApproval{Class: "operator", Approved: true, By: "policy:auto-approve"}},
		{rule: "approval class operator, denied by policy: approval_denied",
			caller: func(c *Caller) { c.Approver = AutoDeny("not during the freeze") },
			want:   CodeApprovalDenied, stage: "approval", approval: &auditApproval{Class: "operator", By: "policy:auto-deny", Reason: "not during the freeze"}},
		{rule: "approval waits bounded by the deadline: approval_timeout",
			caller: func(c *Caller) { c.Approver = blockUntilDone },
			want:   CodeApprovalTimeout, stage: "approval", approval: &auditApproval{Class: "operator", Reason: "no decision before the deadline"}},
		{rule: "approval class operator and no approver: approval_denied",
			caller: func(c *Caller) { c.Approver = nil },
			want:   CodeApprovalDenied, stage: "approval", approval: &auditApproval{Class: "operator", Reason: "no approver"}},
		{rule: "budgets count syscalls and are durable: budget_exceeded",
			spec: func(s *PolicySpec, _ string) { s.RouteBudgets = map[string]int64{BudgetAll: 1} }, slot: SlotBudget, calls: 2,
			want: CodeBudgetExceeded, stage: "budget"},
		{rule: "the image's size bound on arguments: limit_exceeded",
			spec: func(s *PolicySpec, route string) { s.RouteSizes = map[string]SizeBound{route: {MaxArgsBytes: 1}} }, slot: SlotSize,
			want: string(CodeLimitExceeded), stage: "args_size"},
		{rule: "the image's size bound on results: limit_exceeded",
			spec: func(s *PolicySpec, _ string) { s.RouteSizes = map[string]SizeBound{BudgetAll: {MaxResultBytes: 1}} }, slot: SlotSize,
			want: string(CodeLimitExceeded), stage: "result_size"},
	}
	for _, rt := range Routes() {
		for _, v := range variants {
			if v.slot != "" && !slices.Contains(rt.Policy, v.slot) {
				continue // the route does not read the slot; TestRouteSlotsAreDeclared covers that
			}
			t.Run(rt.Name+"/"+v.rule, func(t *testing.T) {
				r, s := newRouter(t, RouterConfig{ApprovalTimeout: 20 * time.Millisecond})
				all := NewCapSet(CapClockNow, CapKVRead, CapKVWrite, CapToolsCall, CapNetFetch)
				spec := base()
				if v.approval != nil {
					spec.RouteApprovals = map[string]ApprovalClass{rt.Name: ApprovalOperator}
				}
				if v.spec != nil {
					v.spec(&spec, rt.Name)
				}
				pol, probs := CompilePolicy(spec)
				if probs != nil {
					t.Fatal(probs)
				}
				c := Caller{PID: "p1", Tool: "t", Capabilities: all, Tools: &echoTools{r: r, caps: all}, Policy: pol}
				if v.caller != nil {
					v.caller(&c)
				}
				args := valid[rt.Name]
				if v.args != nil {
					args = v.args(rt.Name)
				}
				calls := max(v.calls, 1)
				var err error
				for i := 0; i < calls; i++ {
					_, err = r.For(c).Syscall(context.Background(), rt.Name, json.RawMessage(args))
					if i < calls-1 && err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
				}
				if got := codeOf(err); got != v.want {
					t.Fatalf("code %q, want %q (err %v)", got, v.want, err)
				}
				if n := auditCount(t, s, "p1"); n != calls {
					t.Fatalf("%d audit events for %d calls: every decision is an audit event", n, calls)
				}
				ev := lastAudit(t, s, "p1")
				wantDecision := "allowed"
				if v.want != "" {
					wantDecision = "denied"
				}
				if ev.Route != rt.Name || ev.Decision != wantDecision || ev.Code != v.want || ev.Stage != v.stage {
					t.Fatalf("audit %+v, want route %s decision %s code %q stage %s", ev, rt.Name, wantDecision, v.want, v.stage)
				}
				if v.want != "" && ev.Reason == "" {
					t.Fatalf("a denial is audited with its reason: %+v", ev)
				}
				if v.approval != nil && (ev.Approval == nil || *ev.Approval != *v.approval) {
					t.Fatalf("audit approval %+v, want %+v", ev.Approval, v.approval)
				}
				if v.want == CodeBudgetExceeded {
					b, err := s.Budget("p1", BudgetAll)
					if err != nil || b.Used != 1 {
						t.Fatalf("budget counter %+v (%v): the denied call is not charged", b, err)
					}
				}
			})
		}
	}
}

func TestRouterOrder(t *testing.T) {
	// DESIGN: "The router's order is route → capability → approval → arguments →
	// data-flow → budget → provider → result → audit: a call without authority learns
	// nothing about a route's argument contract." JIT authoring Skill: "The model has no
	// syscall-list or syscall-schema introspection operation."
	r, s := newRouter(t, RouterConfig{})
	asked := 0
	counting := ApproverFunc(func(context.Context, ApprovalRequest) (Decision, error) {
		asked++
		return Decision{Approved: false, Reason: "no"}, nil
	})
	t.Run("without the capability the arguments are not looked at", func(t *testing.T) {
		for _, rt := range Routes() {
			for _, args := range []string{`{}`, `{"nonsense":[1,2]}`, `[1]`, `{"key":`} {
				_, err := r.For(Caller{PID: "p", Capabilities: NewCapSet()}).Syscall(context.Background(), rt.Name, json.RawMessage(args))
				var se *Error
				if !errors.As(err, &se) || se.Code != CodeCapabilityDenied {
					t.Fatalf("%s %s: %v, want capability_denied", rt.Name, args, err)
				}
				// The refusal is the same whatever the arguments were, and names no
				// property of the route's schema.
				want := fmt.Sprintf("syscalls: %s requires capability %s, which this process does not hold", rt.Name, rt.Capability)
				if se.Error() != want {
					t.Fatalf("%s %s: %q, want %q", rt.Name, args, se.Error(), want)
				}
				// The audit reason is the refusal as it renders, the layer's name included;
				// the error's Message holds the text alone and its Layer says whose it is.
				if ev := lastAudit(t, s, "p"); ev.Stage != "capability" || ev.Code != CodeCapabilityDenied || ev.Reason != want {
					t.Fatalf("audit %+v, want reason %q", ev, want)
				}
				if se.Layer != Layer || strings.HasPrefix(se.Message, Layer+":") {
					t.Fatalf("layer %q, message %q: the layer's name belongs in Layer, not in Message", se.Layer, se.Message)
				}
			}
		}
	})
	t.Run("approval comes before the arguments are checked", func(t *testing.T) {
		c := Caller{PID: "p", Capabilities: NewCapSet(CapKVWrite), Approver: counting, Policy: mustPolicy(t, PolicySpec{RouteApprovals: map[string]ApprovalClass{"kv.put": ApprovalOperator}})}
		_, err := r.For(c).Syscall(context.Background(), "kv.put", json.RawMessage(`{}`))
		if codeOf(err) != CodeApprovalDenied || asked != 1 {
			t.Fatalf("%v, approver asked %d times", err, asked)
		}
		asked = 0
	})
	t.Run("text that is not JSON is refused as arguments without asking the approver", func(t *testing.T) {
		c := Caller{PID: "p", Capabilities: NewCapSet(CapKVWrite), Approver: counting, Policy: mustPolicy(t, PolicySpec{RouteApprovals: map[string]ApprovalClass{"kv.put": ApprovalOperator}})}
		// Not JSON, and JSON that is not exact: the operator is never shown text whose
		// meaning depends on which duplicate key a reader keeps.
		for _, args := range []string{`{"key":`, `{"key":"a","key":"b","value":1}`, `{"key":"\ud800","value":1}`, "{\"key\":\"\xff\",\"value\":1}"} {
			_, err := r.For(c).Syscall(context.Background(), "kv.put", json.RawMessage(args))
			if codeOf(err) != CodeArgumentInvalid || asked != 0 {
				t.Fatalf("%s: %v, approver asked %d times", args, err, asked)
			}
		}
	})
	t.Run("with the capability, arguments are validated before the budget is charged", func(t *testing.T) {
		c := Caller{PID: "args", Capabilities: NewCapSet(CapClockNow), Policy: mustPolicy(t, PolicySpec{RouteBudgets: map[string]int64{BudgetAll: 5}})}
		_, err := r.For(c).Syscall(context.Background(), "clock.now", json.RawMessage(`{}`))
		if codeOf(err) != CodeArgumentInvalid {
			t.Fatal(err)
		}
		if b, _ := s.Budget("args", BudgetAll); b.Used != 0 {
			t.Fatalf("budget used %d after refused arguments", b.Used)
		}
	})
	t.Run("the capability is checked before the approver is asked", func(t *testing.T) {
		c := Caller{PID: "p", Capabilities: NewCapSet(), Approver: counting, Policy: mustPolicy(t, PolicySpec{RouteApprovals: map[string]ApprovalClass{"clock.now": ApprovalOperator}})}
		_, err := r.For(c).Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`))
		if codeOf(err) != CodeCapabilityDenied || asked != 0 {
			t.Fatalf("%v, approver asked %d times", err, asked)
		}
	})
	t.Run("approval comes before the budget: a denied call is not charged", func(t *testing.T) {
		c := Caller{PID: "p", Capabilities: NewCapSet(CapClockNow), Approver: counting,
			Policy: mustPolicy(t, PolicySpec{RouteApprovals: map[string]ApprovalClass{"clock.now": ApprovalOperator}, RouteBudgets: map[string]int64{BudgetAll: 5}})}
		_, err := r.For(c).Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`))
		if codeOf(err) != CodeApprovalDenied || asked != 1 {
			t.Fatalf("%v, approver asked %d times", err, asked)
		}
		if b, _ := s.Budget("p", BudgetAll); b.Used != 0 {
			t.Fatalf("budget used %d after a denial", b.Used)
		}
	})
	t.Run("an approval class the router does not know is refused with the image, never read as none", func(t *testing.T) {
		if _, probs := CompilePolicy(PolicySpec{RouteApprovals: map[string]ApprovalClass{"clock.now": "Operator"}}); len(probs) != 1 || probs[0].At != "/approvals/routes/clock.now" {
			t.Fatalf("problems %+v", probs)
		}
	})
	t.Run("a negative budget is refused with the image, never read as no budget", func(t *testing.T) {
		if _, probs := CompilePolicy(PolicySpec{RouteBudgets: map[string]int64{BudgetAll: -1}}); len(probs) != 1 || probs[0].At != "/limits/syscall_budgets/syscalls" {
			t.Fatalf("problems %+v", probs)
		}
	})
	t.Run("a zero budget allows nothing", func(t *testing.T) {
		c := Caller{PID: "zero", Capabilities: NewCapSet(CapClockNow), Policy: mustPolicy(t, PolicySpec{RouteBudgets: map[string]int64{BudgetAll: 0}})}
		if _, err := r.For(c).Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`)); codeOf(err) != CodeBudgetExceeded {
			t.Fatal(err)
		}
	})
	t.Run("the approval slot can raise a route to operator approval, never lower it", func(t *testing.T) {
		c := Caller{PID: "p", Capabilities: NewCapSet(CapClockNow), Policy: mustPolicy(t, PolicySpec{RouteApprovals: map[string]ApprovalClass{"clock.now": ApprovalNone}})}
		if _, err := r.For(c).Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnknownSyscallRevealsNothing(t *testing.T) {
	r, s := newRouter(t, RouterConfig{})
	c := Caller{PID: "p", Capabilities: NewCapSet(CapClockNow, CapKVRead, CapKVWrite, CapToolsCall)}
	// Near misses, other cases, other areas and garbage all get the same bytes.
	names := []string{"clock.today", "Clock.now", "clock.now ", "kv", "kv.", "fs.read", "", "syscalls.list", strings.Repeat("x", 300)}
	for _, n := range names {
		_, err := r.For(c).Syscall(context.Background(), n, json.RawMessage(`{"timezone":"UTC"}`))
		var se *Error
		// No layer either: the sandbox's own refusal of a name has none, and the guest
		// must not tell the two apart (unknownSyscallMessage).
		if !errors.As(err, &se) || se.Code != CodeUnknownSyscall || se.Message != unknownSyscallMessage || se.Layer != "" || se.Error() != unknownSyscallMessage {
			t.Fatalf("%q: %v; want the one fixed unknown_syscall error", n, err)
		}
		if !errors.Is(err, ErrUnknownSyscall) {
			t.Fatalf("errors.Is(err, ErrUnknownSyscall) must hold")
		}
		ev := lastAudit(t, s, "p")
		if ev.Decision != "denied" || ev.Code != CodeUnknownSyscall || ev.Stage != "route" || len(ev.Route) > 64+len("…") {
			t.Fatalf("%q: audit %+v", n, ev)
		}
	}
}

func TestCapabilitiesAreExact(t *testing.T) {
	r, _ := newRouter(t, RouterConfig{})
	cases := []struct {
		rule  string
		held  []Capability
		route string
		args  string
		want  string
	}{
		{"kv:write does not grant kv.get", []Capability{CapKVWrite}, "kv.get", `{"key":"a"}`, CodeCapabilityDenied},
		{"kv:read does not grant kv.put", []Capability{CapKVRead}, "kv.put", `{"key":"a","value":1}`, CodeCapabilityDenied},
		{"kv:read grants kv.list", []Capability{CapKVRead}, "kv.list", `{}`, ""},
		{"a wider-looking string grants nothing: kv", []Capability{"kv"}, "kv.get", `{"key":"a"}`, CodeCapabilityDenied},
		{"a wildcard-looking string grants nothing: kv:*", []Capability{"kv:*"}, "kv.get", `{"key":"a"}`, CodeCapabilityDenied},
		{"a wildcard-looking string grants nothing: *", []Capability{"*"}, "clock.now", `{"timezone":"UTC"}`, CodeCapabilityDenied},
		{"capabilities are case-sensitive", []Capability{"Clock:Now"}, "clock.now", `{"timezone":"UTC"}`, CodeCapabilityDenied},
		{"a nil capability set holds nothing", nil, "clock.now", `{"timezone":"UTC"}`, CodeCapabilityDenied},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := Caller{PID: "p", Capabilities: NewCapSet(tc.held...)}
			if tc.held == nil {
				c.Capabilities = nil
			}
			_, err := r.For(c).Syscall(context.Background(), tc.route, json.RawMessage(tc.args))
			if codeOf(err) != tc.want {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
	t.Run("the set is live: the operator revokes and the very next call is denied", func(t *testing.T) {
		caps := NewCapSet(CapClockNow)
		b := r.For(Caller{PID: "p", Capabilities: caps})
		if _, err := b.Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`)); err != nil {
			t.Fatal(err)
		}
		caps.Revoke(CapClockNow)
		if _, err := b.Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`)); codeOf(err) != CodeCapabilityDenied {
			t.Fatal(err)
		}
	})
}

func TestClockNow(t *testing.T) {
	r, _ := newRouter(t, RouterConfig{Clock: FixedClock(time.Date(2026, 1, 2, 3, 4, 5, 999, time.UTC))})
	b := r.For(Caller{PID: "p", Capabilities: NewCapSet(CapClockNow)})
	cases := []struct{ rule, tz, want, code string }{
		{"seed: iso8601 has a numeric offset, +00:00 and never Z", "UTC",
			`{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}`, ""},
		{"IANA zones come from the embedded tz database", "Europe/Paris",
			`{"iso8601":"2026-01-02T04:04:05+01:00","unix_seconds":1767323045,"timezone":"Europe/Paris"}`, ""},
		{"negative offsets", "America/New_York",
			`{"iso8601":"2026-01-01T22:04:05-05:00","unix_seconds":1767323045,"timezone":"America/New_York"}`, ""},
		{"offsets that are not whole hours", "Asia/Kolkata",
			`{"iso8601":"2026-01-02T08:34:05+05:30","unix_seconds":1767323045,"timezone":"Asia/Kolkata"}`, ""},
		{"an unknown zone is a typed argument error", "Mars/Olympus_Mons", "", CodeArgumentInvalid},
		{"Local is not an IANA zone and would reveal the host's", "Local", "", CodeArgumentInvalid},
		{"paths are not zone names", "../../etc/passwd", "", CodeArgumentInvalid},
		{"absolute paths are not zone names", "/etc/localtime", "", CodeArgumentInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			res, err := b.Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":`+quote(tc.tz)+`}`))
			if codeOf(err) != tc.code {
				t.Fatalf("%v, want code %q", err, tc.code)
			}
			if tc.code == "" && string(res) != tc.want {
				t.Fatalf("got %s\nwant %s", res, tc.want)
			}
		})
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestKV(t *testing.T) {
	r, s := newRouter(t, RouterConfig{})
	caps := NewCapSet(CapKVRead, CapKVWrite)
	a := r.For(Caller{PID: "pa", Capabilities: caps})
	other := r.For(Caller{PID: "pb", Capabilities: caps})
	call := func(t *testing.T, b *Bound, route, args string) (string, error) {
		t.Helper()
		res, err := b.Syscall(context.Background(), route, json.RawMessage(args))
		return string(res), err
	}
	must := func(t *testing.T, b *Bound, route, args, want string) {
		t.Helper()
		got, err := call(t, b, route, args)
		if err != nil {
			t.Fatalf("%s %s: %v", route, args, err)
		}
		if want != "" && got != want {
			t.Fatalf("%s %s = %s, want %s", route, args, got, want)
		}
	}
	t.Run("put then get returns the value; numbers keep their exact value (2^53+1)", func(t *testing.T) {
		must(t, a, "kv.put", `{"key":"n","value":{"big":9007199254740993,"f":1.50}}`, `{}`)
		must(t, a, "kv.get", `{"key":"n"}`, `{"found":true,"value":{"big":9007199254740993,"f":1.50}}`)
	})
	t.Run("a missing key is found:false, value:null", func(t *testing.T) {
		must(t, a, "kv.get", `{"key":"missing"}`, `{"found":false,"value":null}`)
	})
	t.Run("a stored null is found:true", func(t *testing.T) {
		must(t, a, "kv.put", `{"key":"nul","value":null}`, `{}`)
		must(t, a, "kv.get", `{"key":"nul"}`, `{"found":true,"value":null}`)
	})
	t.Run("process-scoped: another process does not see the key", func(t *testing.T) {
		must(t, other, "kv.get", `{"key":"n"}`, `{"found":false,"value":null}`)
		must(t, other, "kv.delete", `{"key":"n"}`, `{"deleted":false}`)
		must(t, a, "kv.get", `{"key":"n"}`, `{"found":true,"value":{"big":9007199254740993,"f":1.50}}`)
	})
	t.Run("delete says whether the key existed", func(t *testing.T) {
		must(t, a, "kv.delete", `{"key":"n"}`, `{"deleted":true}`)
		must(t, a, "kv.delete", `{"key":"n"}`, `{"deleted":false}`)
		must(t, a, "kv.get", `{"key":"n"}`, `{"found":false,"value":null}`)
	})
	t.Run("the write is durable in the store, committed with its audit event", func(t *testing.T) {
		must(t, a, "kv.put", `{"key":"d","value":"x"}`, `{}`)
		v, err := s.KVGet("pa", "d")
		if err != nil || string(v) != `"x"` {
			t.Fatalf("store has %q, %v", v, err)
		}
		if ev := lastAudit(t, s, "pa"); ev.Route != "kv.put" || ev.Decision != "allowed" {
			t.Fatalf("audit %+v", ev)
		}
	})
	t.Run("a denied write changes nothing", func(t *testing.T) {
		ro := r.For(Caller{PID: "pa", Capabilities: NewCapSet(CapKVRead)})
		if _, err := call(t, ro, "kv.put", `{"key":"d","value":"y"}`); codeOf(err) != CodeCapabilityDenied {
			t.Fatal(err)
		}
		must(t, a, "kv.get", `{"key":"d"}`, `{"found":true,"value":"x"}`)
	})
	t.Run("key sizes are bounded in bytes, not only characters", func(t *testing.T) {
		ok := strings.Repeat("k", MaxKVKeyBytes)
		must(t, a, "kv.put", `{"key":"`+ok+`","value":1}`, `{}`)
		for _, k := range []string{strings.Repeat("k", MaxKVKeyBytes+1), strings.Repeat("é", 129)} {
			if _, err := call(t, a, "kv.put", `{"key":"`+k+`","value":1}`); codeOf(err) != CodeArgumentInvalid {
				t.Fatalf("%d-byte key: %v", len(k), err)
			}
		}
		if _, err := call(t, a, "kv.get", `{"key":"\ufffd"}`); codeOf(err) != CodeArgumentInvalid {
			t.Fatalf("U+FFFD key: %v", err)
		}
	})
	t.Run("value sizes are bounded", func(t *testing.T) {
		big := `"` + strings.Repeat("v", MaxKVValueBytes) + `"`
		if _, err := call(t, a, "kv.put", `{"key":"big","value":`+big+`}`); codeOf(err) != CodeArgumentInvalid {
			t.Fatal(err)
		}
		must(t, a, "kv.get", `{"key":"big"}`, `{"found":false,"value":null}`)
	})
	t.Run("list pages with an opaque cursor, in byte order, within the prefix", func(t *testing.T) {
		for _, k := range []string{"u/c", "u/a", "u/b", "v/a", "u/d", "u/e"} {
			must(t, a, "kv.put", `{"key":"`+k+`","value":1}`, `{}`)
		}
		var all []string
		cursor := "null"
		pages := 0
		for {
			res, err := call(t, a, "kv.list", `{"prefix":"u/","limit":2,"cursor":`+cursor+`}`)
			if err != nil {
				t.Fatal(err)
			}
			var page struct {
				Keys       []string `json:"keys"`
				NextCursor *string  `json:"next_cursor"`
			}
			if err := json.Unmarshal([]byte(res), &page); err != nil {
				t.Fatal(err)
			}
			pages++
			all = append(all, page.Keys...)
			if page.NextCursor == nil {
				break
			}
			if strings.Contains(*page.NextCursor, "u/") {
				t.Fatalf("the cursor is opaque, not the key: %q", *page.NextCursor)
			}
			cursor = quote(*page.NextCursor)
		}
		if got := strings.Join(all, ","); got != "u/a,u/b,u/c,u/d,u/e" || pages != 3 {
			t.Fatalf("keys %s in %d pages", got, pages)
		}
		must(t, a, "kv.list", `{"prefix":"zzz"}`, `{"keys":[],"next_cursor":null}`)
	})
	t.Run("a cursor from another prefix, or a forged one, is an argument error", func(t *testing.T) {
		res, _ := call(t, a, "kv.list", `{"prefix":"u/","limit":1}`)
		var page struct {
			NextCursor string `json:"next_cursor"`
		}
		_ = json.Unmarshal([]byte(res), &page)
		for _, args := range []string{
			`{"prefix":"v/","cursor":` + quote(page.NextCursor) + `}`,
			`{"prefix":"u/","cursor":"c1"}`,
			`{"prefix":"u/","cursor":"k!!"}`,
		} {
			if _, err := call(t, a, "kv.list", args); codeOf(err) != CodeArgumentInvalid {
				t.Fatalf("%s: %v", args, err)
			}
		}
	})
	t.Run("limits are bounded by the schema", func(t *testing.T) {
		for _, l := range []string{"0", "1001", "2.5", `"3"`} {
			if _, err := call(t, a, "kv.list", `{"limit":`+l+`}`); codeOf(err) != CodeArgumentInvalid {
				t.Fatalf("limit %s: %v", l, err)
			}
		}
		must(t, a, "kv.list", `{"prefix":"u/","limit":1.0}`, "")
	})
}

func TestToolsCall(t *testing.T) {
	r, s := newRouter(t, RouterConfig{MaxToolDepth: 3})
	caps := NewCapSet(CapToolsCall)
	tools := &echoTools{r: r, caps: caps}
	b := r.For(Caller{PID: "p", Capabilities: caps, Tools: tools})
	t.Run("calls another tool of the same process and returns its result", func(t *testing.T) {
		res, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"echo","arguments":{"n":9007199254740993,"nested":{"action":"keep"}}}`))
		if err != nil || string(res) != `{"n":9007199254740993,"nested":{"action":"keep"}}` {
			t.Fatalf("%s, %v", res, err)
		}
	})
	t.Run("a tool that calls itself stops at the depth bound", func(t *testing.T) {
		_, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"recurse","arguments":{}}`))
		if codeOf(err) != string(CodeLimitExceeded) || !strings.Contains(err.Error(), "depth 4 exceeds the bound of 3") {
			t.Fatalf("%v", err)
		}
		evs, _ := s.Events("p", 0, 0)
		depths := map[int]bool{}
		for _, e := range evs {
			var ev auditEvent
			_ = json.Unmarshal(e.Data, &ev)
			depths[ev.Depth] = true
		}
		if !depths[0] || !depths[3] {
			t.Fatalf("every nested call is audited with its depth: %v", depths)
		}
		// The refusal is a decision of its own: denied at the depth stage, not an
		// allowed call whose provider failed.
		var refused int
		for _, e := range evs {
			var ev auditEvent
			_ = json.Unmarshal(e.Data, &ev)
			if ev.Stage == "depth" {
				refused++
				if ev.Decision != "denied" || ev.Code != string(CodeLimitExceeded) || ev.Depth != 3 {
					t.Fatalf("depth refusal audited as %+v", ev)
				}
			}
		}
		if refused != 1 {
			t.Fatalf("%d depth refusals audited, want 1", refused)
		}
	})
	t.Run("the engine's typed refusal keeps its code", func(t *testing.T) {
		_, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"refuses","arguments":{}}`))
		if codeOf(err) != "schema_invalid" {
			t.Fatal(err)
		}
	})
	t.Run("an engine error with ErrorCode keeps its code", func(t *testing.T) {
		_, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"coded","arguments":{}}`))
		if codeOf(err) != "unknown_tool" {
			t.Fatal(err)
		}
	})
	t.Run("any other failure is provider_failed", func(t *testing.T) {
		_, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"nope","arguments":{}}`))
		if codeOf(err) != CodeProviderFailed {
			t.Fatal(err)
		}
		if ev := lastAudit(t, s, "p"); ev.Decision != "allowed" || ev.Stage != "provider" || ev.Code != CodeProviderFailed ||
			!strings.Contains(ev.Cause, `no tool "nope"`) {
			t.Fatalf("audit %+v: the cause is kept on the host", ev)
		}
		if strings.Contains(err.Error(), "nope") {
			t.Fatalf("the guest sees no host internals: %v", err)
		}
	})
	t.Run("run_jit_tool is never a process tool", func(t *testing.T) {
		_, err := b.Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"run_jit_tool","arguments":{}}`))
		if codeOf(err) != CodeArgumentInvalid {
			t.Fatal(err)
		}
	})
	t.Run("without a tool caller the call fails, typed", func(t *testing.T) {
		_, err := r.For(Caller{PID: "p", Capabilities: caps}).Syscall(context.Background(), "tools.call", json.RawMessage(`{"tool":"echo","arguments":{}}`))
		if codeOf(err) != CodeProviderFailed {
			t.Fatal(err)
		}
	})
}

func TestBudgetsAreDurableAndScoped(t *testing.T) {
	st := openStore(t)
	r, _ := newRouter(t, RouterConfig{Store: st})
	c := Caller{PID: "p", Capabilities: NewCapSet(CapKVRead, CapKVWrite, CapClockNow),
		Policy: mustPolicy(t, PolicySpec{RouteBudgets: map[string]int64{"kv.put": 1, "kv": 2}})}
	do := func(route, args string) string {
		_, err := r.For(c).Syscall(context.Background(), route, json.RawMessage(args))
		return codeOf(err)
	}
	if got := do("kv.put", `{"key":"a","value":1}`); got != "" {
		t.Fatal(got)
	}
	if got := do("kv.put", `{"key":"a","value":2}`); got != CodeBudgetExceeded {
		t.Fatalf("route budget: %s", got)
	}
	if got := do("kv.get", `{"key":"a"}`); got != "" {
		t.Fatal(got)
	}
	if got := do("kv.get", `{"key":"a"}`); got != CodeBudgetExceeded {
		t.Fatalf("area budget: %s", got)
	}
	if got := do("clock.now", `{"timezone":"UTC"}`); got != "" {
		t.Fatalf("other areas are not charged: %s", got)
	}
	// A new router over the same store (a restarted host) sees the spent budgets.
	r2, _ := newRouter(t, RouterConfig{Store: st})
	if _, err := r2.For(c).Syscall(context.Background(), "kv.get", json.RawMessage(`{"key":"a"}`)); codeOf(err) != CodeBudgetExceeded {
		t.Fatalf("budgets are durable: %v", err)
	}
	if b, _ := st.Budget("p", "syscalls:kv"); b.Used != 2 {
		t.Fatalf("kv counter %d, want 2: a denied call is not charged", b.Used)
	}
	if b, _ := st.Budget("p", "syscalls:kv.put"); b.Used != 1 {
		t.Fatalf("kv.put counter %d, want 1", b.Used)
	}
}

func TestAuditFailureFailsTheCall(t *testing.T) {
	st := openStore(t)
	r, _ := newRouter(t, RouterConfig{Store: st})
	st.Close()
	_, err := r.For(Caller{PID: "p", Capabilities: NewCapSet(CapClockNow)}).Syscall(context.Background(), "clock.now", json.RawMessage(`{"timezone":"UTC"}`))
	if codeOf(err) != CodeAuditFailed || !errors.Is(err, store.ErrClosed) {
		t.Fatalf("nothing unaudited is acknowledged: %v", err)
	}
}

func TestErrorsConvert(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", errorf(CodeBudgetExceeded, "budget spent", nil))
	if !errors.Is(err, ErrBudgetExceeded) || errors.Is(err, ErrCapabilityDenied) {
		t.Fatal("errors.Is matches by code")
	}
}

// The size slot: "a size bound on its arguments and result", which the image fills
// (limits.syscall_sizes) and the router enforces with limit_exceeded. A call over the
// bound is refused and audited like every decision: arguments before anyone is asked
// to approve them or any budget is charged, a result before it reaches the code, and
// then the call's writes are not applied. The tightest bound that applies wins.
func TestSizeBound(t *testing.T) {
	r, s := newRouter(t, RouterConfig{})
	asked := 0
	approver := ApproverFunc(func(context.Context, ApprovalRequest) (Decision, error) {
		asked++
		return Decision{Approved: true, By: "test"}, nil
	})
	pol := mustPolicy(t, PolicySpec{
		RouteApprovals: map[string]ApprovalClass{"kv.put": ApprovalOperator},
		RouteBudgets:   map[string]int64{BudgetAll: 100},
		RouteSizes: map[string]SizeBound{
			BudgetAll: {MaxArgsBytes: 40},
			"kv":      {MaxResultBytes: 30},
			"kv.put":  {MaxArgsBytes: 1000, MaxResultBytes: 1},
		},
	})
	c := Caller{PID: "p", Capabilities: NewCapSet(CapKVRead, CapKVWrite, CapClockNow), Approver: approver, Policy: pol}
	call := func(route, args string) error {
		_, err := r.For(c).Syscall(context.Background(), route, json.RawMessage(args))
		return err
	}

	// Arguments: kv.put's own 1000 does not loosen the 40 every route has.
	long := `{"key":"k","value":"` + strings.Repeat("x", 40) + `"}`
	if err := call("kv.put", long); codeOf(err) != string(CodeLimitExceeded) || !strings.Contains(err.Error(), "more than the image's bound of 40") {
		t.Fatalf("arguments over the bound: %v", err)
	}
	if ev := lastAudit(t, s, "p"); ev.Decision != "denied" || ev.Stage != "args_size" || ev.Code != string(CodeLimitExceeded) || ev.Reason == "" {
		t.Fatalf("audit %+v", ev)
	}
	if b, _ := s.Budget("p", BudgetAll); asked != 0 || b.Used != 0 {
		t.Fatalf("approver asked %d times, budget used %d: arguments over the bound are refused first", asked, b.Used)
	}

	// Result: kv.put's {} (2 bytes) is over its bound of 1; its write is not applied.
	if err := call("kv.put", `{"key":"k","value":1}`); codeOf(err) != string(CodeLimitExceeded) {
		t.Fatalf("result over the bound: %v", err)
	}
	if ev := lastAudit(t, s, "p"); ev.Decision != "denied" || ev.Stage != "result_size" || ev.Code != string(CodeLimitExceeded) {
		t.Fatalf("audit %+v", ev)
	}

	// The area's 30 bounds kv.get's result; clock.now reads no size slot.
	if err := call("kv.get", `{"key":"k"}`); err != nil {
		t.Fatalf("a small result passes: %v", err)
	}
	if err := call("clock.now", `{"timezone":"UTC"}`); err != nil {
		t.Fatalf("clock.now declares no size slot: %v", err)
	}
	if n := auditCount(t, s, "p"); n != 4 {
		t.Fatalf("%d audit events for 4 calls", n)
	}
	got, err := r.For(Caller{PID: "p", Capabilities: NewCapSet(CapKVRead)}).Syscall(context.Background(), "kv.get", json.RawMessage(`{"key":"k"}`))
	if err != nil || string(got) != `{"found":false,"value":null}` {
		t.Fatalf("the write of the call refused at its result was applied: %s %v", got, err)
	}
}
