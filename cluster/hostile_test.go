package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentlibos/libos/store"
)

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
