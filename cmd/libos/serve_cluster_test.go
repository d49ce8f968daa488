package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentlibos/libos/cluster"
)

// CLUSTER.md: "serve --cluster --serve-labels k=v,... takes over only the processes
// whose image carries every one of these process labels"; a malformed list is a usage
// error, before anything starts.
func TestServeLabelsFlag(t *testing.T) {
	e := &env{}
	o, err := clusterFlags{on: true, serveLabels: " team=billing , tier=edge"}.options(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"team": "billing", "tier": "edge"}; !maps.Equal(o.ServeLabels, want) {
		t.Fatalf("ServeLabels %v, want %v", o.ServeLabels, want)
	}
	if o, err := (clusterFlags{on: true}).options(e); err != nil || len(o.ServeLabels) != 0 {
		t.Fatalf("no --serve-labels: %v, %v (want every process)", o, err)
	}
	for _, bad := range []string{"team", "=billing", "team=a,team=b", "team=bill ing", "te am=x"} {
		_, err := clusterFlags{on: true, serveLabels: bad}.options(e)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("--serve-labels %q: %v, want a usage error", bad, err)
		}
	}
	if _, err := (clusterFlags{serveLabels: "team=billing"}).options(e); err == nil {
		t.Error("--serve-labels without --cluster was accepted")
	}
}

// STYLE: a secret "must never reach logs, errors or events". `libos ps --nats URL`
// with credentials in the URL that cannot be used reports the URL with its user
// information redacted.
func TestPsNATSURLCredentialsRedacted(t *testing.T) {
	const secret = "s3cret-Pw0rd"
	data := filepath.Join(t.TempDir(), "store")
	demoStore(t, data)
	r := libos(t, "", "ps", "--data", data, "--nats", "nats://alice:"+secret+"@127.0.0.1:notaport")
	if r.code == 0 {
		t.Fatalf("ps with an unusable --nats URL succeeded: %s", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("ps printed the URL's password: %s", r.stderr)
	}
	if !strings.Contains(r.stderr, "redacted") {
		t.Fatalf("ps does not name the URL, redacted: %s", r.stderr)
	}
}

// printable: a string from outside "can then neither start a line of its own ... nor
// drive the terminal". The host `libos ps --nats` prints for a process is what a
// client of the cluster's NATS server wrote in the lease bucket: its control
// characters are printed escaped in the table (and as JSON with --json).
func TestPsPrintsALeasesHostEscaped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	data := filepath.Join(t.TempDir(), "store")
	demoStore(t, data)
	var procs []struct {
		PID string `json:"pid"`
	}
	if r := libos(t, "", "ps", "--json", "--data", data); r.code != 0 || json.Unmarshal([]byte(r.stdout), &procs) != nil || len(procs) == 0 {
		t.Fatalf("ps --json: %d %s", r.code, r.stdout)
	}
	srv, err := cluster.StartServer(cluster.ServerConfig{Dir: filepath.Join(t.TempDir(), "js"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := cluster.Connect(ctx, cluster.Config{Host: "a", URL: srv.ClientURL(), Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cluster.DefaultStream+"_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	const forged = "\x1b[2J\n--- PASS\u202e"
	val, _ := json.Marshal(map[string]string{"host": forged})
	if _, err := kv.Put(ctx, "p."+procs[0].PID, val); err != nil {
		t.Fatal(err)
	}
	r := libos(t, "", "ps", "--data", data, "--nats", srv.ClientURL())
	if r.code != 0 {
		t.Fatalf("ps --nats: %d %s", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stdout, "\x1b\u202e") || strings.Contains(r.stdout, "\n--- PASS") {
		t.Fatalf("ps printed the lease's host raw:\n%q", r.stdout)
	}
	if !strings.Contains(r.stdout, `\x1b[2J\n--- PASS\u202e`) {
		t.Fatalf("ps does not show the lease's host escaped:\n%q", r.stdout)
	}
	j := libos(t, "", "ps", "--json", "--data", data, "--nats", srv.ClientURL())
	var rows []struct {
		PID  string `json:"pid"`
		Host string `json:"host"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &rows); err != nil {
		t.Fatalf("ps --json --nats: %v\n%s", err, j.stdout)
	}
	for _, row := range rows {
		if row.PID == procs[0].PID && row.Host != forged {
			t.Fatalf("ps --json shows host %q, want the lease's %q", row.Host, forged)
		}
	}
}
