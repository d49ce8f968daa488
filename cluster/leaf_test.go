package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentlibos/libos/store"
)

// The edge topology (CLUSTER.md, "An edge host as a leaf node"): "an edge host may run
// as a leaf node of a hub" and runs locally, its process log reaching the hub when it
// is connected. The edge's embedded server is a leaf node of the hub with its own
// JetStream domain; its node writes the process log to its own stream (R1), and the hub
// mirrors that stream from the edge's domain. The edge goes on writing while the hub is
// down; once the hub is back its mirror catches up, and a store rebuilt on the hub from
// the mirror holds the edge's log event for event and verifies it.
func TestLeafEdgeReachesHub(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two NATS servers")
	}
	ctx := context.Background()
	addrs := loopbackAddrs(t, 3)
	hubCfg := ServerConfig{Name: "hub", Dir: filepath.Join(t.TempDir(), "hub"), Listen: addrs[0], LeafListen: addrs[1], Domain: "hub"}
	hub, err := StartServer(hubCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hub.Shutdown() }()
	edge, err := StartServer(ServerConfig{Name: "edge", Dir: filepath.Join(t.TempDir(), "edge"), Listen: addrs[2],
		LeafRemotes: []string{"nats-leaf://" + addrs[1]}, Domain: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Shutdown()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	node, err := Connect(cctx, Config{Host: "edge", URL: edge.ClientURL(), Replicas: 1})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Abandon()
	st, err := store.Open(t.TempDir(), store.Options{Replicator: node})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	node.Start(st, nil)

	// The hub mirrors the edge's stream, reaching it through the leaf connection.
	mirror := func() (jetstream.Stream, func()) {
		nc, err := nats.Connect(hub.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		var s jetstream.Stream
		if err := retryFor(30*time.Second, func(ctx context.Context) error {
			s, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "LIBOS_EDGE", Replicas: 1,
				Mirror: &jetstream.StreamSource{Name: DefaultStream, Domain: "edge"}})
			return err
		}); err != nil {
			t.Fatalf("the hub's mirror of the edge: %v", err)
		}
		return s, nc.Close
	}
	caughtUp := func(s jetstream.Stream) {
		t.Helper()
		want, err := node.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := retryFor(60*time.Second, func(ctx context.Context) error {
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.LastSeq < want.State.LastSeq {
				return fmt.Errorf("the hub's mirror is at %d, the edge at %d", info.State.LastSeq, want.State.LastSeq)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	const pid = "pid_edge"
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := st.Append(ctx, pid, "note", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				t.Fatalf("the edge's append %d: %v", i, err)
			}
		}
	}
	ms, closeHub := mirror()
	appendN(0, 3)
	caughtUp(ms)
	closeHub()

	// The hub goes away; the edge goes on.
	hub.Shutdown()
	appendN(3, 3)
	if hub, err = StartServer(hubCfg); err != nil {
		t.Fatal(err)
	}
	ms, closeHub = mirror()
	defer closeHub()
	caughtUp(ms)

	// A store on the hub, rebuilt from the mirror alone.
	hst, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer hst.Close()
	info, err := ms.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := ms.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var prev uint64
		fmt.Sscan(m.Header.Get(HeaderPrev), &prev)
		if _, err := hst.ApplyReplicated(ctx, store.Replicated{Pos: m.Sequence, PID: m.Header.Get(HeaderPID), Prev: prev, Ops: m.Data}); err != nil {
			t.Fatalf("apply message %d of the mirror on the hub: %v", seq, err)
		}
	}
	want, err := st.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := hst.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || len(want) != 6 {
		t.Fatalf("the hub holds %d events of %s, the edge %d; 6 were acknowledged", len(got), pid, len(want))
	}
	for i := range want {
		if string(got[i].Hash) != string(want[i].Hash) {
			t.Fatalf("the hub's copy forks from the edge's at event %d", want[i].Seq)
		}
	}
	if err := hst.Verify(pid); err != nil {
		t.Fatalf("verify on the hub: %v", err)
	}
}
