package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentlibos/libos/store"
)

// CLUSTER.md: a killed process is served by no host, so "its lease is given up, not
// renewed": once the process record says killed, the host stops renewing the lease and
// deletes it, and no host holds it afterwards.
func TestKilledProcessLeaseIsGivenUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx := context.Background()
	c := newTCluster(t, 1, Config{Replicas: 1, LeaseTTL: 2 * time.Second, Serve: func(string) bool { return false }})
	m := c.ms[0]
	const pid = "pid_killed"
	put := func(state string) {
		t.Helper()
		if err := m.st.Update(ctx, func(tx *store.Tx) error {
			return tx.PutProcess(store.Process{PID: pid, State: state})
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("running")
	if _, err := m.st.Append(ctx, pid, "note", json.RawMessage(`{"i":1}`)); err != nil {
		t.Fatal(err)
	}
	if !m.node.Holds(pid) {
		t.Fatal("the host does not hold the lease of the process it created")
	}
	put("killed")
	// Renewals run every quarter TTL; wait for a few of them.
	deadline := time.Now().Add(20 * time.Second)
	for m.node.Holds(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m.node.Holds(pid) {
		t.Fatal("the lease of a killed process is still held")
	}
	if err := retryFor(10*time.Second, func(ctx context.Context) error {
		_, err := m.node.kv.Get(ctx, m.node.leaseKey(pid))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return errors.New("the lease key is still in the bucket")
	}); err != nil {
		t.Fatal(err)
	}
}

// A batch is one message on one process's subject: "a batch that writes two existing
// processes is refused" with cross_process_batch before anything is acknowledged or
// applied, while a batch that writes an existing process and a new one (a fork) goes
// through on the existing one's subject.
func TestCrossProcessBatchRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx := context.Background()
	c := newTCluster(t, 1, Config{Replicas: 1, Serve: func(string) bool { return false }})
	st := c.ms[0].st
	for _, pid := range []string{"pid_x", "pid_y"} {
		if _, err := st.Append(ctx, pid, "note", json.RawMessage(`{"first":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	err := st.Update(ctx, func(tx *store.Tx) error {
		if _, err := tx.Append("pid_x", "note", json.RawMessage(`{"both":1}`)); err != nil {
			return err
		}
		_, err := tx.Append("pid_y", "note", json.RawMessage(`{"both":2}`))
		return err
	})
	if !errors.Is(err, ErrCrossProcessBatch) {
		t.Fatalf("a batch writing two existing processes: %v, want cross_process_batch", err)
	}
	for _, pid := range []string{"pid_x", "pid_y"} {
		if h, _ := st.Head(pid); h.Seq != 1 {
			t.Fatalf("the refused batch was applied to %s: head %d", pid, h.Seq)
		}
	}
	// An existing process and a new one: the fork's shape.
	if err := st.Update(ctx, func(tx *store.Tx) error {
		if _, err := tx.Append("pid_x", "note", json.RawMessage(`{"forked":"pid_z"}`)); err != nil {
			return err
		}
		_, err := tx.Append("pid_z", "note", json.RawMessage(`{"from":"pid_x"}`))
		return err
	}); err != nil {
		t.Fatalf("a batch writing an existing process and a new one: %v", err)
	}
	if !c.ms[0].node.Holds("pid_z") {
		t.Fatal("the host does not hold the new process's lease")
	}
}
