package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"
)

// The randomized fault loop with its checker: three hosts, three processes, and a
// random run of appends by the owner, handoffs (the owner gives the lease up and
// another host takes the process over, while the old owner goes on believing it holds
// it), appends by hosts that are not the owner, hosts killed and started again on
// their directories, and hosts whose routes are cut and healed. At most one host is
// down or cut off at a time, so the two others keep a quorum. At the end every host is
// back and has applied the stream, and the checker asks what the replicated mode
// promises: "every acknowledged call's events present exactly once on every host,
// chains verify, no two hosts ever served the same process at the same fencing
// token"; besides, no refused append is anywhere, and an append whose fate was unknown
// (replication_failed) is there at most once. make test runs a few dozen steps;
// LIBOS_SOAK=1 (make soak) runs 1000.
func TestRandomizedOwnershipChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	steps := 30
	if os.Getenv("LIBOS_SOAK") != "" {
		steps = 1000
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	c := newTCluster(t, 3, Config{LeaseTTL: 2 * time.Second, AckTimeout: time.Second, Serve: func(string) bool { return false }})
	pids := []string{"pid_r0", "pid_r1", "pid_r2"}
	owner := map[string]int{}
	acked := map[string][]string{}
	for i, pid := range pids {
		// Host i creates pid (and so takes its lease) with a first write.
		owner[pid] = i
		d := fmt.Sprintf(`{"created_by":%d}`, i)
		if err := retryFor(30*time.Second, func(ctx context.Context) error {
			_, err := c.ms[i].st.Append(ctx, pid, "note", json.RawMessage(d))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		acked[pid] = append(acked[pid], d)
	}
	refused := map[string]bool{}
	unknown := map[string]bool{}
	faulty, cut := -1, false // the host down or cut off, if any
	kills, cuts := 0, 0
	reachable := func(i int) bool { return i != faulty }

	// takeover moves pid to a reachable host other than its owner (any reachable host
	// when the owner is not): the owner, when reachable, gives the lease up; else the
	// new owner waits for it to expire.
	takeover := func(step int, pid string) {
		from := owner[pid]
		var to int
		for {
			to = rng.Intn(3)
			if reachable(to) && (to != from || !reachable(from)) {
				break
			}
		}
		var stale *lease
		if from >= 0 && reachable(from) {
			m := c.ms[from]
			m.node.mu.Lock()
			if l := m.node.held[pid]; l != nil {
				cp := *l
				stale = &cp
			}
			m.node.mu.Unlock()
			m.node.lose(pid, "handoff")
		}
		if err := retryFor(60*time.Second, func(ctx context.Context) error { return c.ms[to].node.Takeover(ctx, pid) }); err != nil {
			t.Fatalf("step %d: %s takes %s over: %v", step, c.ms[to].name, pid, err)
		}
		if stale != nil && from != to {
			// The previous owner goes on believing it holds the lease.
			m := c.ms[from]
			m.node.mu.Lock()
			stale.renewed = time.Now()
			m.node.held[pid] = stale
			m.node.mu.Unlock()
		}
		owner[pid] = to
	}

	// mend starts the killed host again or heals the cut one.
	mend := func(step int) {
		switch {
		case faulty < 0:
		case cut:
			c.net.heal(faulty, 3)
			t.Logf("step %d: %s's routes healed", step, c.ms[faulty].name)
		default:
			if err := c.start(faulty); err != nil {
				t.Fatalf("step %d: start %s again: %v", step, c.ms[faulty].name, err)
			}
			t.Logf("step %d: %s started again", step, c.ms[faulty].name)
		}
		faulty, cut = -1, false
	}

	for step := 0; step < steps; step++ {
		pid := pids[rng.Intn(len(pids))]
		r := rng.Intn(100)
		switch {
		case step == steps/4 && kills == 0:
			r = 90 // at least one kill per run
		case step == steps/2 && cuts == 0:
			r = 95 // and one partition
		}
		switch {
		case r < 60: // the owner appends
			o := owner[pid]
			if o < 0 || !reachable(o) {
				takeover(step, pid)
				o = owner[pid]
			}
			d := fmt.Sprintf(`{"step":%d,"by":%d}`, step, o)
			_, err := c.ms[o].st.Append(ctx, pid, "note", json.RawMessage(d))
			switch {
			case err == nil:
				acked[pid] = append(acked[pid], d)
			case errors.Is(err, ErrLeaseLost):
				// The lease lapsed under the owner (a heartbeat lost in a leader
				// election): refused, nothing of it anywhere.
				refused[d] = true
				owner[pid] = -1
			case errors.Is(err, ErrReplicationFailed):
				unknown[d] = true
			default:
				t.Fatalf("step %d: the owner's append: %v", step, err)
			}
		case r < 75: // handoff
			takeover(step, pid)
		case r < 85: // a host that is not the owner appends: never acknowledged
			for i, m := range c.ms {
				if i == owner[pid] || !m.up {
					continue
				}
				d := fmt.Sprintf(`{"step":%d,"stale":%d}`, step, i)
				_, err := m.st.Append(ctx, pid, "note", json.RawMessage(d))
				if err == nil {
					t.Fatalf("step %d: %s's append of %s was acknowledged though %s owns it", step, m.name, pid, c.ms[max(owner[pid], 0)].name)
				}
				if !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrReplicationFailed) {
					t.Fatalf("step %d: a stale append: %v, want lease_lost or replication_failed", step, err)
				}
				refused[d] = true
			}
		case r < 95: // kill a host, or start the killed one again
			if faulty >= 0 && !cut && r != 90 {
				mend(step)
			} else {
				mend(step)
				faulty = rng.Intn(3)
				c.kill(faulty)
				kills++
				t.Logf("step %d: %s killed", step, c.ms[faulty].name)
			}
		default: // cut a host's routes, or heal them
			if faulty >= 0 && cut && r != 95 {
				mend(step)
			} else {
				mend(step)
				faulty, cut = rng.Intn(3), true
				c.net.partition(faulty, 3)
				cuts++
				t.Logf("step %d: %s's routes cut", step, c.ms[faulty].name)
			}
		}
	}
	mend(steps)
	// Checker.
	if err := c.settle(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		want, err := c.ms[0].st.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range c.ms {
			checkLog(t, m, pid, acked[pid], refused, want)
		}
		seen := map[string]int{}
		for _, e := range want {
			seen[string(e.Data)]++
		}
		for d := range unknown {
			if seen[d] > 1 {
				t.Fatalf("an append of unknown fate, %s, is there %d times", d, seen[d])
			}
		}
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
	n := 0
	for _, a := range acked {
		n += len(a)
	}
	t.Logf("%d steps: %d acknowledged, %d refused, %d of unknown fate, %d kills, %d partitions, %d fencing tokens",
		steps, n, len(refused), len(unknown), kills, cuts, len(tokens))
}
