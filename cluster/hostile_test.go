package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentlibos/libos/store"
)

// publishRaw publishes m on member i's server as any client of the subjects could,
// without the node, and returns the message's stream sequence.
func publishRaw(t *testing.T, c *tcluster, i int, m *nats.Msg) uint64 {
	t.Helper()
	nc, err := nats.Connect(c.ms[i].srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func rawMsg(subject string, hdr map[string]string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	return m
}

// CLUSTER.md: "hosts of a cluster trust each other's batches (they are checked for
// shape and chain position, not re-executed)". A message on the process subjects that
// is not a batch of the process its subject names (no or garbled headers, another
// process's identity, a chain position that is not its subject's, an encoding the
// store cannot read, a fencing token older than one already applied, or from the
// future of the lease bucket) is refused with invalid_batch: nothing of it is applied,
// the applier neither stops nor stalls on it, the process's owner keeps writing, and
// no fencing token of it fences anyone out.
func TestMalformedMessagesAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx := context.Background()
	var logs logSink
	c := newTCluster(t, 1, Config{Replicas: 1, LeaseTTL: 2 * time.Second, Serve: func(string) bool { return false }, Logf: logs.logf})
	m := c.ms[0]
	const pid = "pid_target"
	for i := 0; i < 2; i++ {
		if _, err := m.st.Append(ctx, pid, "note", json.RawMessage(`{"i":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	m.node.mu.Lock()
	epoch := m.node.held[pid].epoch
	m.node.mu.Unlock()
	subj := m.node.Subject(pid)
	before, err := m.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := m.st.Position(pid)
	if err != nil {
		t.Fatal(err)
	}
	good := func(p string, e uint64, prev uint64) map[string]string {
		return map[string]string{HeaderPID: p, HeaderPrev: strconv.FormatUint(prev, 10),
			HeaderEpoch: strconv.FormatUint(e, 10), HeaderHost: "intruder"}
	}
	huge := uint64(1) << 62
	cases := []struct {
		name    string
		subject string
		hdr     func(prev uint64) map[string]string
		data    []byte
	}{
		{"no headers", subj, func(uint64) map[string]string { return nil }, []byte("garbage")},
		{"no epoch", subj, func(prev uint64) map[string]string {
			return map[string]string{HeaderPID: pid, HeaderPrev: strconv.FormatUint(prev, 10), HeaderHost: "m0"}
		}, store.EmptyBatch()},
		{"another process's identity", m.node.Subject("pid_other"), func(prev uint64) map[string]string { return good(pid, huge, prev) }, store.EmptyBatch()},
		{"a chain position that is not the subject's", subj, func(prev uint64) map[string]string { return good(pid, epoch, prev+100) }, store.EmptyBatch()},
		{"an encoding the store cannot read", subj, func(prev uint64) map[string]string { return good(pid, epoch, prev) }, append(store.EmptyBatch(), 1, 200)},
		{"a fencing token from the future", subj, func(prev uint64) map[string]string { return good(pid, huge, prev) }, store.EmptyBatch()},
		{"a stale fencing token", subj, func(prev uint64) map[string]string { return good(pid, epoch-1, prev) }, store.EmptyBatch()},
		{"no process's subject", DefaultSubject + ".a.b", func(prev uint64) map[string]string { return good(pid, epoch, prev) }, store.EmptyBatch()},
	}
	for _, tc := range cases {
		logs.reset()
		seq := publishRaw(t, c, 0, rawMsg(tc.subject, tc.hdr(pos), tc.data))
		if tc.subject == subj {
			pos = seq
		}
		// The applier reports the message refused and goes past it.
		if err := retryFor(10*time.Second, func(ctx context.Context) error {
			if err := m.node.Err(); err != nil {
				return err
			}
			if !logs.has(string(CodeInvalidBatch)) {
				return errors.New("no invalid_batch reported")
			}
			if a, err := m.st.Applied(); err != nil || a < seq && tc.subject == subj {
				return fmt.Errorf("applied %d, not yet %d (%v)", a, seq, err)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: the applier did not refuse message %d and go past it: %v; log: %v", tc.name, seq, err, logs.lines())
		}
		// The owner's next append goes through.
		if _, err := m.st.Append(ctx, pid, "note", json.RawMessage(`{"after":`+strconv.Quote(tc.name)+`}`)); err != nil {
			t.Fatalf("%s: the owner's append after the message: %v", tc.name, err)
		}
		pos, _ = m.st.Position(pid)
	}
	if err := m.st.Verify(pid); err != nil {
		t.Fatal(err)
	}
	after, err := m.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+len(cases) {
		t.Fatalf("%d events after %d appends on %d: something of a refused message was applied", len(after), len(cases), len(before))
	}
}

// logSink collects a node's log lines.
type logSink struct {
	mu sync.Mutex
	ls []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ls = append(l.ls, fmt.Sprintf(format, args...))
}

func (l *logSink) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ls = nil
}

func (l *logSink) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ls...)
}

func (l *logSink) has(sub string) bool {
	for _, s := range l.lines() {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// CLUSTER.md: a lease is renewed "every quarter TTL" and expires only "when its host
// stops renewing it". A host busy taking processes over (cfg.Serve deciding, a fence,
// the kernel restoring a process) for longer than a lease lives goes on renewing the
// leases it holds: the processes it serves are not lost to its own takeovers.
func TestRenewalsOutlastSlowTakeovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx := context.Background()
	const ttl = 2 * time.Second
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	serve := func(string) bool {
		if armed.Load() {
			once.Do(func() { close(entered); <-release })
		}
		return false
	}
	c := newTCluster(t, 1, Config{Replicas: 1, LeaseTTL: ttl, Serve: serve})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	m := c.ms[0]
	const pid = "pid_busy"
	if err := m.st.Update(ctx, func(tx *store.Tx) error {
		return tx.PutProcess(store.Process{PID: pid, State: "running"})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.st.Append(ctx, pid, "note", json.RawMessage(`{"i":1}`)); err != nil {
		t.Fatal(err)
	}
	if !m.node.Holds(pid) {
		t.Fatal("the host does not hold the lease of the process it created")
	}
	armed.Store(true) // the next Serve blocks until released
	<-entered
	// The takeover pass is stuck for twice the TTL: the lease must still be renewed.
	time.Sleep(2 * ttl)
	held := m.node.Holds(pid)
	close(release)
	if !held {
		t.Fatal("the host lost the lease of its process while a takeover pass was busy")
	}
	if _, err := m.st.Append(ctx, pid, "note", json.RawMessage(`{"i":2}`)); err != nil {
		t.Fatalf("the owner's append after the busy takeover pass: %v", err)
	}
}

// errorTexts is the text of err and of every error it wraps.
func errorTexts(err error) []string {
	var out []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		out = append(out, e.Error(), fmt.Sprintf("%+v", e))
	}
	return out
}

// STYLE: a secret "must never reach logs, errors or events". A NATS URL, a route or a
// leaf remote may carry credentials (user:password@, or a token@); an error about one
// (a malformed URL, a failed connection) names it with its user information redacted,
// in its message and in every cause it wraps.
func TestURLCredentialsNeverInErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const secret = "s3cret-Pw0rd"
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, s := range errorTexts(err) {
			if strings.Contains(s, secret) {
				t.Fatalf("%s: the error carries the secret: %s", what, s)
			}
		}
		if !strings.Contains(err.Error(), redacted) {
			t.Fatalf("%s: the error does not name the URL, redacted: %s", what, err)
		}
	}
	for _, u := range []string{
		"nats://alice:" + secret + "@127.0.0.1:notaport",
		"nats://" + secret + "@127.0.0.1:notaport",
		"nats://127.0.0.1:4222,nats://bob:" + secret + "@[::1:4222",
	} {
		_, err := Connect(ctx, Config{Host: "h", URL: u})
		check("Connect "+RedactURL(u), err)
		_, err = ReadPlacements(ctx, u, "")
		check("ReadPlacements "+RedactURL(u), err)
	}
	dir := t.TempDir()
	_, err := StartServer(ServerConfig{Dir: dir, Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:0",
		Routes: []string{"nats-route://carol:" + secret + "@127.0.0.1:bad"}})
	check("a route", err)
	_, err = StartServer(ServerConfig{Dir: dir, Listen: "127.0.0.1:0",
		LeafRemotes: []string{"nats-leaf://" + secret + "@[::1:7422"}})
	check("a leaf remote", err)
}
