package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentlibos/libos/store"
)

// The fencing rule under a real network partition: "a host partitioned from the
// cluster (its NATS routes cut) while it believes it holds the lease cannot get a
// single append acknowledged; after the partition heals it rejoins as a follower
// without forking the log." The routes of host a are cut by closing its TCP
// connections (a proxy carries every route), while a still holds the lease by its own
// clock; every append a tries from then on is refused with a typed error, b takes the
// process over on the majority side and writes, and once the routes are restored a
// applies b's writes on top of its own log, holds the same chain, verifies it, and is
// refused (lease_lost) when it tries to write again.
func TestPartitionedOwnerIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	c := newTCluster(t, 3, Config{LeaseTTL: 3 * time.Second, AckTimeout: 500 * time.Millisecond, Serve: func(string) bool { return false }})
	a, b := c.ms[0], c.ms[1]
	const pid = "pid_partitioned"
	var acked []string
	for i := 0; i < 3; i++ {
		d := fmt.Sprintf(`{"a":%d}`, i)
		if err := retryFor(30*time.Second, func(ctx context.Context) error {
			_, err := a.st.Append(ctx, pid, "note", json.RawMessage(d))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, d)
	}
	if !a.node.Holds(pid) {
		t.Fatal("a does not hold the lease of the process it created")
	}

	c.net.partition(0, 3)
	refused := map[string]bool{}
	believed := 0
	tryA := func(i int) {
		d := fmt.Sprintf(`{"partitioned":%d}`, i)
		if a.node.Holds(pid) {
			believed++
		}
		_, err := a.st.Append(ctx, pid, "note", json.RawMessage(d))
		if err == nil {
			t.Fatalf("append %d of the partitioned owner was acknowledged", i)
		}
		if !errors.Is(err, ErrReplicationFailed) && !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("append %d of the partitioned owner: %v, want replication_failed or lease_lost", i, err)
		}
		refused[d] = true
	}
	tryA(0)
	if believed == 0 {
		t.Fatal("a no longer believed it held the lease at its first partitioned append")
	}
	// b takes the process over once the lease expires on the majority side (and the
	// stream has a leader there), while a keeps trying.
	n := 1
	deadline := time.Now().Add(60 * time.Second)
	for {
		tryA(n)
		n++
		err := b.node.Takeover(ctx, pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b could not take the process over on the majority side: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		d := fmt.Sprintf(`{"b":%d}`, i)
		if _, err := b.st.Append(ctx, pid, "note", json.RawMessage(d)); err != nil {
			t.Fatalf("the new owner's append: %v", err)
		}
		acked = append(acked, d)
		tryA(n)
		n++
	}
	t.Logf("a tried %d appends while partitioned, %d of them believing it held the lease", n, believed)

	c.net.heal(0, 3)
	if err := c.settle(60 * time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
	want, err := b.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.ms {
		checkLog(t, m, pid, acked, refused, want)
	}
	if a.node.Holds(pid) {
		t.Fatal("a serves the process again after the heal")
	}
	if _, err := a.st.Append(ctx, pid, "note", json.RawMessage(`{"a":"after"}`)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a's append after the heal: %v, want lease_lost", err)
	}
	tokens, err := c.tokenWriters(0)
	if err != nil {
		t.Fatal(err)
	}
	for tok, hosts := range tokens {
		if len(hosts) > 1 {
			t.Fatalf("two hosts wrote %s: %v", tok, hosts)
		}
	}
}

// checkLog checks m's copy of pid's log: the chain verifies, every acknowledged write
// is in it exactly once, no refused write is, and it is event for event the reference
// log want (when given).
func checkLog(t *testing.T, m *tmember, pid string, acked []string, refused map[string]bool, want []store.Event) {
	t.Helper()
	evs, err := m.st.Events(pid, 0, 0)
	if err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
	if err := m.st.Verify(pid); err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
	seen := map[string]int{}
	for _, e := range evs {
		seen[string(e.Data)]++
		if refused[string(e.Data)] {
			t.Fatalf("%s holds the refused write %s of %s", m.name, e.Data, pid)
		}
	}
	for _, d := range acked {
		if seen[d] != 1 {
			t.Fatalf("%s: the acknowledged write %s of %s is there %d times", m.name, d, pid, seen[d])
		}
	}
	if want == nil {
		return
	}
	if len(evs) != len(want) {
		t.Fatalf("%s holds %d events of %s, the reference %d", m.name, len(evs), pid, len(want))
	}
	for i := range evs {
		if string(evs[i].Hash) != string(want[i].Hash) {
			t.Fatalf("%s's log of %s forks from the reference at event %d", m.name, pid, evs[i].Seq)
		}
	}
}
