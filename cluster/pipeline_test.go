package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Pipelined appends: "batches of different processes are in flight to the replicated
// log together; batches of one process still go one at a time, each read-check-write
// seeing the one before." Eight writers on eight processes and four more writers all
// on one process append at once on one host of three; every append is acknowledged,
// every log verifies on every host and holds each acknowledged event once.
func TestPipelinedAppends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	c := newTCluster(t, 3, Config{LeaseTTL: 5 * time.Second, Serve: func(string) bool { return false }})
	a := c.ms[0]
	const per = 15
	var mu sync.Mutex
	acked := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	write := func(w int, pid string) {
		defer wg.Done()
		for i := 0; i < per; i++ {
			d := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
			if _, err := a.st.Append(ctx, pid, "note", json.RawMessage(d)); err != nil {
				errs <- fmt.Errorf("writer %d on %s: %w", w, pid, err)
				return
			}
			mu.Lock()
			acked[pid] = append(acked[pid], d)
			mu.Unlock()
		}
	}
	for w := 0; w < 12; w++ {
		pid := fmt.Sprintf("pid_p%d", w)
		if w >= 8 {
			pid = "pid_shared"
		}
		wg.Add(1)
		go write(w, pid)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.settle(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for pid, ds := range acked {
		want, err := a.st.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(ds) {
			t.Fatalf("%s holds %d events, %d were acknowledged", pid, len(want), len(ds))
		}
		for _, m := range c.ms {
			checkLog(t, m, pid, ds, nil, want)
		}
	}
	// UpdateProcess is for one process's writes only.
	err := a.st.UpdateProcess(ctx, "pid_p0", func(tx *store.Tx) error {
		_, err := tx.Append("pid_p1", "note", json.RawMessage(`{}`))
		return err
	})
	if liberr.CodeOf(err) != store.CodeInvalid {
		t.Fatalf("UpdateProcess writing another process: %v, want invalid", err)
	}
}
