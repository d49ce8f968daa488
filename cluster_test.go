package libos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/cluster"
	"github.com/agentlibos/libos/store"
)

// testLeaseTTL keeps failover short on loopback; production uses the default.
const testLeaseTTL = 2 * time.Second

// freePorts returns n loopback addresses nothing listens on now.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// host is one libOS host of a test cluster.
type host struct {
	name, dir, listen, clusterAddr string
	routes                         []string
	cache                          string            // the compilation cache the hosts share
	labels                         map[string]string // ClusterOptions.ServeLabels
	sys                            *libos.System
}

// open opens h's System. It may run on its own goroutine, so a failure is reported with
// Errorf and startHosts stops the test once every host has tried.
func (h *host) open(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sys, err := libos.Open(ctx, h.dir, libos.Options{CacheDir: h.cache, Cluster: &libos.ClusterOptions{
		Host: h.name, Listen: h.listen, ClusterListen: h.clusterAddr, Routes: h.routes,
		LeaseTTL: testLeaseTTL, Logf: t.Logf, ServeLabels: h.labels,
	}})
	if err != nil {
		t.Errorf("open %s: %v", h.name, err)
		return
	}
	h.sys = sys
}

// startHosts starts n hosts routed to each other, each with its own store and
// JetStream directory, concurrently (JetStream forms its Raft group once a quorum is up).
// labels[i], when given, is host i's ServeLabels.
func startHosts(t testing.TB, n int, labels ...map[string]string) []*host {
	t.Helper()
	// The guest is compiled once, before the hosts start, rather than by every host at
	// once under the 60 s bound of its Open (three parallel compiles under the race
	// detector on a busy machine can take longer than that).
	cache := t.TempDir()
	if err := libos.WarmCache(context.Background(), cache); err != nil {
		t.Fatalf("warm the compilation cache: %v", err)
	}
	clients, routes := freePorts(t, n), freePorts(t, n)
	hs := make([]*host, n)
	for i := range hs {
		hs[i] = &host{name: fmt.Sprintf("h%d", i), dir: filepath.Join(t.TempDir(), "store"), listen: clients[i], clusterAddr: routes[i], cache: cache}
		if i < len(labels) {
			hs[i].labels = labels[i]
		}
		for j, r := range routes {
			if j != i {
				hs[i].routes = append(hs[i].routes, r)
			}
		}
	}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() { defer wg.Done(); h.open(t) }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, h := range hs {
			if h.sys != nil {
				h.sys.Close()
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return hs
}

// servedBy waits until one of hs serves pid and returns it.
func servedBy(t testing.TB, pid string, within time.Duration, hs ...*host) *host {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, h := range hs {
			if _, err := h.sys.Process(pid); err == nil {
				return h
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no host took %s over within %v", pid, within)
	return nil
}

// CLUSTER.md and DESIGN, beyond one host: "a process is served by one host at a time
// under a lease whose revision fences stale owners; another host takes over a lost
// process, catches up from the stream and rehydrates it." Three hosts, a process with
// a JIT tool on the first; the first is lost without a clean shutdown; another serves
// the process with every acknowledged event, a log that verifies, its JIT tool by
// name, and its call in flight reported as unknown settlement.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	t0 := time.Now()
	hs := startHosts(t, 3)
	t.Logf("three hosts up in %v", time.Since(t0))
	a := hs[0]
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := a.sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if !a.sys.Cluster().Holds(pid) {
		t.Fatal("the spawning host does not hold the new process's lease")
	}
	register(t, a.sys, pid)
	for i := 0; i < 3; i++ {
		callAdd(t, a.sys, pid)
	}
	// A fork writes the new process and an event of the checkpoint's process in one
	// batch: it travels on the existing process's subject.
	cp, err := a.sys.Checkpoint(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	forked, err := a.sys.Fork(ctx, cp)
	if err != nil {
		t.Fatalf("fork in the replicated mode: %v", err)
	}
	callAdd(t, a.sys, forked)
	// A call in flight when the host is lost: its tool_called is acknowledged, its
	// settlement never comes.
	if _, err := a.sys.Store().Append(ctx, pid, store.EventToolCalled, json.RawMessage(`{"call_id":"in-flight","tool":"add"}`)); err != nil {
		t.Fatal(err)
	}
	acked, err := a.sys.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("spawned, registered, called at %v", time.Since(t0))
	libos.Crash(a.sys)
	lost := time.Now()

	b := servedBy(t, pid, 60*time.Second, hs[1], hs[2])
	t.Logf("%s serves %s %v after the loss of %s", b.name, pid, time.Since(lost), a.name)
	got, err := b.sys.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < len(acked) {
		t.Fatalf("%s has %d events of %s, %d were acknowledged", b.name, len(got), pid, len(acked))
	}
	for i, e := range acked {
		if string(got[i].Hash) != string(e.Hash) || got[i].Type != e.Type {
			t.Fatalf("event %d: %s has %s, %s acknowledged %s", e.Seq, b.name, got[i].Type, a.name, e.Type)
		}
	}
	if err := b.sys.VerifyLog(pid); err != nil {
		t.Fatalf("verify on %s: %v", b.name, err)
	}
	callAdd(t, b.sys, pid)
	var unknown bool
	for _, u := range b.sys.UnknownSettlements() {
		unknown = unknown || (u.PID == pid && u.CallID == "in-flight")
	}
	if !unknown {
		t.Fatalf("the call in flight was not reported as unknown settlement: %+v", b.sys.UnknownSettlements())
	}
	ps, err := b.sys.Placements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var where string
	for _, p := range ps {
		if p.PID == pid {
			where = p.Host
		}
	}
	if where != b.name {
		t.Fatalf("placements say %s is on %q, it is served by %s", pid, where, b.name)
	}
	f := servedBy(t, forked, 60*time.Second, hs[1], hs[2])
	if err := f.sys.VerifyLog(forked); err != nil {
		t.Fatalf("verify the fork on %s: %v", f.name, err)
	}
	callAdd(t, f.sys, forked)
	// The lost host's kernel is still in memory (a partitioned host, say): it no
	// longer serves the process, and its store refuses any write of it.
	_, err = a.sys.Store().Append(ctx, pid, "note", json.RawMessage(`{"from":"the lost host"}`))
	if err == nil || !(errors.Is(err, cluster.ErrLeaseLost) || errors.Is(err, cluster.ErrReplicationFailed)) {
		t.Fatalf("an append on the lost host: %v, want lease_lost or replication_failed", err)
	}
}

// The issue: "libos serve --cluster takes the processes it may serve (all, or by
// label)". Two processes on the first host, of images labelled team=billing and
// team=search; the second host serves billing, the third search. When the first host
// is lost, each process is taken over by the one host its labels select, and never by
// the other.
func TestClusterServeLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	hs := startHosts(t, 3, nil, map[string]string{"team": "billing"}, map[string]string{"team": "search", "tier": "edge"})
	a := hs[0]
	spawn := func(labels map[string]string) string {
		img, err := libos.DefaultImage()
		if err != nil {
			t.Fatal(err)
		}
		img.ProcessLabels = labels
		pid, err := a.sys.SpawnImage(ctx, img)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	billing := spawn(map[string]string{"team": "billing"})
	search := spawn(map[string]string{"team": "search", "tier": "edge"})
	// Only team=search: the third host needs tier=edge too, the second team=billing.
	orphan := spawn(map[string]string{"team": "search"})
	libos.Crash(a.sys)

	if h := servedBy(t, billing, 60*time.Second, hs[1], hs[2]); h != hs[1] {
		t.Fatalf("%s (team=billing) taken over by %s", billing, h.name)
	}
	if h := servedBy(t, search, 60*time.Second, hs[1], hs[2]); h != hs[2] {
		t.Fatalf("%s (team=search, tier=edge) taken over by %s", search, h.name)
	}
	// Four lease scans later, the process no host's labels select is still unserved.
	time.Sleep(testLeaseTTL)
	for _, h := range hs[1:] {
		if _, err := h.sys.Process(orphan); err == nil {
			t.Fatalf("%s serves %s, whose labels its --serve-labels do not select", h.name, orphan)
		}
	}
	ps, err := hs[1].sys.Placements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.PID == orphan {
			t.Fatalf("placements put %s on %s", orphan, p.Host)
		}
	}
}
