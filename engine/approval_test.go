package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

type outcome struct {
	out []byte
	err error
}

func (w *world) callAsync(ctx context.Context, pid, name, args string) chan outcome {
	ch := make(chan outcome, 1)
	k := w.k
	go func() {
		frame := []byte(`{"name":"` + name + `","arguments":` + jsonQuote(args) + `}`)
		res, err := k.HandleFrame(ctx, pid, frame)
		if err != nil {
			ch <- outcome{err: err}
			return
		}
		ch <- outcome{out: res.Structured}
	}()
	return ch
}

func jsonQuote(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestToolApproval: "A route or tool with approval class operator creates a durable
// pending approval (who, what, exact arguments, hash of the tool definition) that the
// operator approves or denies; the waiting call proceeds or fails with a typed code;
// a timeout denies."
func TestToolApproval(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	pid := w.spawnImage(t, loadImage(t, "approvals.yaml"))

	t.Run("approve", func(t *testing.T) {
		ch := w.callAsync(ctx, pid, "echo", `{"x": 1, "y":[true]}`)
		a := w.waitPending(t, 1)[0]
		if a.PID != pid || a.Kind != "tool" || a.Subject != "echo" || a.Tool != "echo" || a.Via != "model" ||
			string(a.Args) != `{"x":1,"y":[true]}` || a.ArgsSHA256 != sum(`{"x":1,"y":[true]}`) || len(a.DefinitionSHA256) != 64 ||
			a.State != engine.ApprovalPending || !a.Deadline.After(time.Now()) {
			t.Fatalf("pending approval = %+v", a)
		}
		if err := w.k.Approve(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if r.err != nil || string(r.out) != `{"x":1,"y":[true]}` {
			t.Fatalf("approved call: %s, %v", r.out, r.err)
		}
		as, _ := w.k.Approvals(pid)
		if as[len(as)-1].State != engine.ApprovalUsed || as[len(as)-1].DecidedBy != "operator" {
			t.Fatalf("after the call: %+v", as[len(as)-1])
		}
		if err := w.k.Approve(ctx, a.ID); !errors.Is(err, engine.ErrInvalidState) {
			t.Fatalf("approving a used approval: %v", err)
		}
	})

	t.Run("deny", func(t *testing.T) {
		before := countType(w.events(t, pid), engine.EventToolCalled)
		ch := w.callAsync(ctx, pid, "echo", `{"x":2}`)
		a := w.waitPending(t, 1)[0]
		if err := w.k.Deny(ctx, a.ID, "not today"); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if !errors.Is(r.err, engine.ErrApprovalDenied) {
			t.Fatalf("denied call: %v", r.err)
		}
		evs := w.events(t, pid)
		if countType(evs, engine.EventToolCalled) != before || field(t, lastOf(t, evs, engine.EventCallRejected), "code") != "approval_denied" {
			t.Fatal("a denied call must be refused before tool_called, and audited")
		}
		if d := lastOf(t, evs, engine.EventApprovalDecided); field(t, d, "decision") != "denied" || field(t, d, "reason") != "not today" {
			t.Fatalf("approval_decided = %s", d.Data)
		}
	})

	t.Run("timeout denies", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := w.k.HandleFrame(tctx, pid, []byte(`{"name":"echo","arguments":{"x":3}}`))
		if !errors.Is(err, engine.ErrApprovalTimeout) {
			t.Fatalf("unanswered approval: %v", err)
		}
		as, _ := w.k.Approvals(pid)
		a := as[len(as)-1]
		if a.State != engine.ApprovalExpired {
			t.Fatalf("after the timeout: %+v", a)
		}
		if err := w.k.Approve(ctx, a.ID); !errors.Is(err, engine.ErrInvalidState) {
			t.Fatalf("a late approval: %v", err)
		}
		if _, err := w.k.PendingApprovals(); err != nil {
			t.Fatal(err)
		}
	})

	// "An approval is bound to the exact arguments and the exact tool definition hash:
	// if either changes, the approval does not apply." A pending approval survives a
	// restart; approved afterwards, it lets through exactly one call with the same
	// arguments and nothing else.
	t.Run("changed arguments", func(t *testing.T) {
		ch := w.callAsync(ctx, pid, "echo", `{"x":4}`)
		a := w.waitPending(t, 1)[0]
		w.reopen(t)
		if r := <-ch; !errors.Is(r.err, engine.ErrClosed) {
			t.Fatalf("the waiting call at close: %v", r.err)
		}
		if p := w.waitPending(t, 1); p[0].ID != a.ID {
			t.Fatalf("pending after reopen: %+v", p)
		}
		if err := w.k.Approve(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		short := func(args string) error {
			tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := w.k.HandleFrame(tctx, pid, []byte(`{"name":"echo","arguments":`+args+`}`))
			return err
		}
		if err := short(`{"x":5}`); !errors.Is(err, engine.ErrApprovalTimeout) {
			t.Fatalf("other arguments used the approval: %v", err)
		}
		if err := short(`{ "x" : 4 }`); err != nil {
			t.Fatalf("the same arguments: %v", err)
		}
		if err := short(`{"x":4}`); !errors.Is(err, engine.ErrApprovalTimeout) {
			t.Fatalf("an approval let a second call through: %v", err)
		}
	})
}

// TestRouteApproval: an operator-class syscall inside a JIT tool waits for a durable
// approval bound to its arguments and to the calling tool's definition.
func TestRouteApproval(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{ApprovalTimeout: 30 * time.Second})
	ctx := context.Background()
	def, _ := tools.DefaultImage()
	def.Approvals.Routes = map[string]syscalls.ApprovalClass{"write": syscalls.ApprovalOperator}
	pid := w.spawnImage(t, def)
	toolID := w.register(t, pid, noter("note"))

	ch := w.callAsync(ctx, pid, "note", `{"key":"a","value":"b"}`)
	a := w.waitPending(t, 1)[0]
	if a.Kind != "route" || a.Subject != "kv.put" || a.Tool != "note" || a.ToolID != toolID || a.Capability != "kv:write" ||
		string(a.Args) != `{"key":"a","value":"b"}` {
		t.Fatalf("route approval = %+v", a)
	}
	if err := w.k.Approve(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || string(r.out) != `{"stored":"a"}` {
		t.Fatalf("approved syscall: %s, %v", r.out, r.err)
	}
	if v, err := w.st.KVGet(pid, "a"); err != nil || string(v) != `"b"` {
		t.Fatalf("kv a = %s, %v", v, err)
	}

	// The tool is replaced (operator revocation, a new registration under the same
	// name) while its call waits: the approval was for the old definition.
	ch = w.callAsync(ctx, pid, "note", `{"key":"e","value":"f"}`)
	a = w.waitPending(t, 1)[0]
	if err := w.k.RevokeBinding(ctx, pid, "note", "replaced"); err != nil {
		t.Fatal(err)
	}
	w.register(t, pid, noter("note"))
	if err := w.k.Approve(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if liberr.CodeOf(r.err) != "approval_denied" {
		t.Fatalf("approval for another definition: %v (%s)", r.err, liberr.CodeOf(r.err))
	}
	if _, err := w.st.KVGet(pid, "e"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the syscall ran on an approval for another definition")
	}
	if countType(w.events(t, pid), engine.EventApprovalInapplicable) != 1 {
		t.Fatal("no approval_inapplicable event")
	}

	// A denial reaches the program as approval_denied, audited by the router.
	ch = w.callAsync(ctx, pid, "note", `{"key":"g","value":"h"}`)
	a = w.waitPending(t, 1)[0]
	if err := w.k.Deny(ctx, a.ID, "no"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; liberr.CodeOf(r.err) != "approval_denied" {
		t.Fatalf("denied syscall: %v", r.err)
	}
}

// TestJITToolApproval: with approvals.jit_tools operator, "an operator-class tool
// waits for a decision before its call is opened" holds for every JIT tool the
// process registers, bound to its arguments and its definition, while the image's
// own tools (the lifecycle that registers it, echo) run without one.
func TestJITToolApproval(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	ctx := context.Background()
	img := loadImage(t, "jit-approvals.yaml")
	if img.Approvals.JITTools != syscalls.ApprovalOperator {
		t.Fatalf("approvals.jit_tools = %q", img.Approvals.JITTools)
	}
	pid := w.spawnImage(t, img)
	toolID := w.register(t, pid, noter("note")) // propose, validate, register: no approval
	if out := w.mustCall(t, pid, "echo", `{"x":1}`); out["x"] != float64(1) {
		t.Fatalf("echo = %v", out)
	}
	if as, _ := w.k.PendingApprovals(); len(as) != 0 {
		t.Fatalf("an image tool asked for approval: %+v", as)
	}

	before := countType(w.events(t, pid), engine.EventToolCalled)
	ch := w.callAsync(ctx, pid, "note", `{"key":"a","value":"b"}`)
	a := w.waitPending(t, 1)[0]
	if a.Kind != "tool" || a.Subject != "note" || a.Tool != "note" || a.ToolID != toolID ||
		string(a.Args) != `{"key":"a","value":"b"}` || len(a.DefinitionSHA256) != 64 {
		t.Fatalf("JIT tool approval = %+v", a)
	}
	if countType(w.events(t, pid), engine.EventToolCalled) != before {
		t.Fatal("the JIT tool's call was opened before its approval")
	}
	if _, err := w.st.KVGet(pid, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the JIT tool ran before its approval")
	}
	if err := w.k.Approve(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || string(r.out) != `{"stored":"a"}` {
		t.Fatalf("approved JIT call: %s, %v", r.out, r.err)
	}

	ch = w.callAsync(ctx, pid, "note", `{"key":"c","value":"d"}`)
	a = w.waitPending(t, 1)[0]
	if err := w.k.Deny(ctx, a.ID, "no"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; !errors.Is(r.err, engine.ErrApprovalDenied) {
		t.Fatalf("denied JIT call: %v", r.err)
	}
	if _, err := w.st.KVGet(pid, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a denied JIT call ran")
	}
}
