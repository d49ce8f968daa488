package cluster

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentlibos/libos/store"
)

// publishRaw publishes m on member i's server as any client of the subjects could,
// without a node, and returns the message's stream sequence.
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

// CLUSTER.md: "invalid_batch (a message on the process subjects that is not a batch of
// the process its subject names: headers missing or malformed, another process's
// identity, a chain position that is not its subject's previous message, writes the
// store cannot read, a subject of no process; every host refuses it alike and logs it,
// applies nothing of it but its position on its subject, and goes on with the next
// message)". Each such message is published by a plain client on a three-host
// cluster: every host logs its refusal, none stops or stalls, the owner's next append
// goes through, and the three copies of the log are the same, holding only the
// owner's events.
func TestMessagesThatAreNotBatchesAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS servers")
	}
	ctx := context.Background()
	var logs logSink
	c := newTCluster(t, 3, Config{LeaseTTL: 5 * time.Second, Serve: func(string) bool { return false }, Logf: logs.logf})
	owner := c.ms[0]
	const pid = "pid_target"
	for i := 0; i < 2; i++ {
		if _, err := owner.st.Append(ctx, pid, "note", json.RawMessage(`{"i":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	owner.node.mu.Lock()
	epoch := owner.node.held[pid].epoch
	owner.node.mu.Unlock()
	subj := owner.node.Subject(pid)
	headers := func(p string, prev uint64) map[string]string {
		return map[string]string{HeaderPID: p, HeaderPrev: strconv.FormatUint(prev, 10),
			HeaderEpoch: strconv.FormatUint(epoch, 10), HeaderHost: "m1"}
	}
	// A write of this host's bookkeeping (the applied position), which never travels.
	metaKey := append([]byte("meta"), 0, 'r', 'e', 'p', 'l', 'i', 'c', 'a', 't', 'e', 'd')
	bookkeeping := append(store.EmptyBatch(), 1)
	bookkeeping = binary.AppendUvarint(bookkeeping, uint64(len(metaKey)))
	bookkeeping = append(bookkeeping, metaKey...)
	bookkeeping = binary.AppendUvarint(bookkeeping, 8)
	bookkeeping = append(bookkeeping, 0, 0, 0, 0, 0, 0, 0, 1)
	cases := []struct {
		name    string
		subject string
		hdr     func(prev uint64) map[string]string
		data    []byte
	}{
		{"no headers", subj, func(uint64) map[string]string { return nil }, []byte("garbage")},
		{"no fencing token", subj, func(prev uint64) map[string]string {
			h := headers(pid, prev)
			delete(h, HeaderEpoch)
			return h
		}, store.EmptyBatch()},
		{"a chain position that is not a number", subj, func(prev uint64) map[string]string {
			h := headers(pid, prev)
			h[HeaderPrev] = "-1"
			return h
		}, store.EmptyBatch()},
		{"a host name that is none", subj, func(prev uint64) map[string]string {
			h := headers(pid, prev)
			h[HeaderHost] = "m1\x1b[2J"
			return h
		}, store.EmptyBatch()},
		{"another process's identity", owner.node.Subject("pid_other"), func(prev uint64) map[string]string { return headers(pid, prev) }, store.EmptyBatch()},
		{"a chain position that is not the subject's", subj, func(prev uint64) map[string]string { return headers(pid, prev+100) }, store.EmptyBatch()},
		{"a chain position of another subject", subj, func(prev uint64) map[string]string { return headers(pid, 1) }, store.EmptyBatch()},
		{"an encoding the store cannot read", subj, func(prev uint64) map[string]string { return headers(pid, prev) }, append(store.EmptyBatch(), 1, 200)},
		{"a write of the host's bookkeeping", subj, func(prev uint64) map[string]string { return headers(pid, prev) }, bookkeeping},
		{"no process's subject", DefaultSubject + ".a.b", func(prev uint64) map[string]string { return headers(pid, prev) }, store.EmptyBatch()},
		{"another spelling of the subject", DefaultSubject + ".=" + base64.RawURLEncoding.EncodeToString([]byte(pid)), func(prev uint64) map[string]string { return headers(pid, prev) }, store.EmptyBatch()},
	}
	for _, tc := range cases {
		logs.reset()
		pos, err := owner.st.Position(pid)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(tc.subject)
		m.Data = tc.data
		for k, v := range tc.hdr(pos) {
			m.Header.Set(k, v)
		}
		seq := publishRaw(t, c, 1, m)
		// Every host reports the message refused.
		if err := retryFor(10*time.Second, func(context.Context) error {
			for _, mb := range c.ms {
				if err := mb.node.Err(); err != nil {
					return err
				}
				if !logs.has(fmt.Sprintf("cluster %s: refused message %d of the stream (invalid_batch)", mb.name, seq)) {
					return fmt.Errorf("%s did not report message %d refused", mb.name, seq)
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v; log: %q", tc.name, err, logs.lines())
		}
		// The owner's next append goes through, after the refused message.
		if _, err := owner.st.Append(ctx, pid, "note", json.RawMessage(`{"after":`+strconv.Quote(tc.name)+`}`)); err != nil {
			t.Fatalf("%s: the owner's append after the message: %v", tc.name, err)
		}
		if now, _ := owner.st.Position(pid); now <= seq {
			t.Fatalf("%s: the owner's append is at %d, not after message %d", tc.name, now, seq)
		}
	}
	if err := c.settle(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var first []store.Event
	for i, mb := range c.ms {
		if err := mb.node.Err(); err != nil {
			t.Fatalf("%s stopped applying: %v", mb.name, err)
		}
		if err := mb.st.Verify(pid); err != nil {
			t.Fatalf("%s: %v", mb.name, err)
		}
		evs, err := mb.st.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2+len(cases) {
			t.Fatalf("%s holds %d events, want the owner's %d", mb.name, len(evs), 2+len(cases))
		}
		if i == 0 {
			first = evs
		} else if !reflect.DeepEqual(evs, first) {
			t.Fatalf("%s's log differs from %s's", mb.name, c.ms[0].name)
		}
		if evs, _ := mb.st.Events("pid_other", 0, 0); len(evs) > 0 {
			t.Fatalf("%s holds events of pid_other", mb.name)
		}
	}
}

// logSink collects the nodes' log lines.
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
