package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentlibos/libos/store"
)

// The checker, on a randomized run of ownership changes among three hosts:
// handoffs (the owner gives a lease up, another takes the process over and fences it)
// and appends from stale owners that still believe they hold the lease. At the end:
// every acknowledged append is present exactly once on every host, every chain
// verifies, no refused append is anywhere, and no two hosts ever wrote a process at
// the same fencing token. LIBOS_SOAK=1 runs it longer (make soak).
func TestRandomizedOwnershipChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	steps := 40
	if os.Getenv("LIBOS_SOAK") != "" {
		steps = 2000
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	ms := threeMembers(t, 5*time.Second)
	pids := []string{"pid_r0", "pid_r1", "pid_r2"}
	owner := map[string]int{}
	acked := map[string][]string{}
	refused := map[string]bool{}
	for i, pid := range pids {
		owner[pid] = i
	}
	for step := 0; step < steps; step++ {
		pid := pids[rng.Intn(len(pids))]
		o := ms[owner[pid]]
		switch r := rng.Intn(10); {
		case r < 6: // the owner appends
			data := fmt.Sprintf(`{"step":%d}`, step)
			if _, err := o.st.Append(ctx, pid, "note", json.RawMessage(data)); err != nil {
				t.Fatalf("step %d: the owner's append: %v", step, err)
			}
			acked[pid] = append(acked[pid], data)
		case r < 8: // handoff to another host
			next := (owner[pid] + 1 + rng.Intn(2)) % 3
			o.node.mu.Lock()
			l := o.node.held[pid]
			o.node.mu.Unlock()
			if l == nil {
				continue // never written yet
			}
			o.node.lose(pid, "handoff")
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := ms[next].node.Takeover(ctx, pid)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("step %d: takeover of %s: %v", step, pid, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The previous owner still believes it holds the lease.
			o.node.mu.Lock()
			o.node.held[pid] = &lease{epoch: l.epoch, rev: l.rev, renewed: time.Now()}
			o.node.mu.Unlock()
			owner[pid] = next
		default: // a stale owner tries to append
			for i, m := range ms {
				if i == owner[pid] {
					continue
				}
				m.node.mu.Lock()
				_, believes := m.node.held[pid]
				m.node.mu.Unlock()
				if !believes {
					continue
				}
				data := fmt.Sprintf(`{"stale":%d}`, step)
				_, err := m.st.Append(ctx, pid, "note", json.RawMessage(data))
				if err == nil {
					t.Fatalf("step %d: a stale owner's append of %s was acknowledged", step, pid)
				}
				if !errors.Is(err, ErrLeaseLost) {
					t.Fatalf("step %d: a stale owner's append: %v, want lease_lost", step, err)
				}
				refused[data] = true
			}
		}
	}
	// Checker.
	info, err := ms[0].node.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := m.node.waitApplied(wctx, info.State.LastSeq); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
	}
	for _, pid := range pids {
		var first []store.Event
		for i, m := range ms {
			evs, err := m.st.Events(pid, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.st.Verify(pid); err != nil {
				t.Fatalf("host %d: %v", i, err)
			}
			seen := map[string]int{}
			for _, e := range evs {
				seen[string(e.Data)]++
				if refused[string(e.Data)] {
					t.Fatalf("host %d holds a refused append %s", i, e.Data)
				}
			}
			for _, d := range acked[pid] {
				if seen[d] != 1 {
					t.Fatalf("host %d: acknowledged %s of %s present %d times", i, d, pid, seen[d])
				}
			}
			if first == nil {
				first = evs
			} else if len(first) != len(evs) || (len(evs) > 0 && string(first[len(first)-1].Hash) != string(evs[len(evs)-1].Hash)) {
				t.Fatalf("host %d's log of %s differs from host 0's", i, pid)
			}
		}
	}
	// No two hosts at the same fencing token: read every message's headers.
	byToken := map[string]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := ms[0].node.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Header
		tok := h.Get(HeaderPID) + "@" + h.Get(HeaderEpoch)
		if _, err := strconv.ParseUint(h.Get(HeaderEpoch), 10, 64); err != nil {
			t.Fatalf("a message without a fencing token: %v", h)
		}
		if prev, ok := byToken[tok]; ok && prev != h.Get(HeaderHost) {
			t.Fatalf("%s written by %s and %s", tok, prev, h.Get(HeaderHost))
		}
		byToken[tok] = h.Get(HeaderHost)
	}
}
