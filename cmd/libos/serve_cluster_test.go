package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"os"
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

// CLUSTER.md: "--nats-token-file FILE: the embedded server takes only clients, routes
// and leaf nodes that present the token, and this host presents it"; the file holds
// the token alone. A file that is missing, holds more than one line or a token that
// cannot be one is a usage error before anything starts, and no error shows the token.
func TestNATSTokenFileFlag(t *testing.T) {
	e := &env{}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const token = "cluster-token-of-32-bytes-exactly"
	for _, text := range []string{token, token + "\n", token + "\r\n"} {
		o, err := clusterFlags{on: true, tokenFile: write("good", text)}.options(e)
		if err != nil || o.Token != token {
			t.Fatalf("token file %q: %v, token %q", text, err, o.Token)
		}
	}
	for name, text := range map[string]string{
		"short": "short-token\n", "two-lines": token + "\n" + token + "\n", "spaces": "a token with spaces in it\n",
		"empty": "", "control": token + "\x1b\n",
	} {
		_, err := clusterFlags{on: true, tokenFile: write(name, text)}.options(e)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("token file %s: %v, want a usage error", name, err)
			continue
		}
		if strings.Contains(err.Error(), token) || (len(text) > 8 && strings.Contains(err.Error(), strings.TrimSpace(text))) {
			t.Errorf("token file %s: the error shows the token: %v", name, err)
		}
	}
	if _, err := (clusterFlags{on: true, tokenFile: "/dev/zero"}).options(e); err == nil {
		t.Error("an endless token file was accepted")
	}
	if _, err := (clusterFlags{on: true, tokenFile: filepath.Join(dir, "missing")}).options(e); err == nil {
		t.Error("a missing token file was accepted")
	}
	if _, err := (clusterFlags{tokenFile: write("good", token)}).options(e); err == nil {
		t.Error("--nats-token-file without --cluster was accepted")
	}
}

// `libos ps --nats URL --nats-token-file FILE` reads the placements of a cluster whose
// server asks for the token; without the file the server refuses ps, and ps says so.
func TestPsWithNATSToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	const token = "ps-cluster-token-0123456789abcdef"
	data := filepath.Join(t.TempDir(), "store")
	demoStore(t, data)
	srv, err := cluster.StartServer(cluster.ServerConfig{Dir: filepath.Join(t.TempDir(), "js"), Listen: "127.0.0.1:0", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := cluster.Connect(ctx, cluster.Config{Host: "a", URL: srv.ClientURL(), Token: token, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := libos(t, "", "ps", "--data", data, "--nats", srv.ClientURL(), "--nats-token-file", file); r.code != 0 {
		t.Fatalf("ps --nats with the token file: %d %s", r.code, r.stderr)
	}
	r := libos(t, "", "ps", "--data", data, "--nats", srv.ClientURL())
	if r.code == 0 || !strings.Contains(strings.ToLower(r.stderr), "authorization") || !strings.Contains(r.stderr, "cluster token") {
		t.Fatalf("ps --nats without the token: %d %s, want a refusal naming the authorization", r.code, r.stderr)
	}
	if r := libos(t, "", "ps", "--data", data, "--nats-token-file", file); r.code != exitUsage {
		t.Fatalf("--nats-token-file without --nats: %d %s, want a usage error", r.code, r.stderr)
	}
}

// CLUSTER.md: the embedded NATS server "beyond loopback takes only the hosts' token, as
// HTTP beyond loopback takes only authenticated clients". serve --cluster refuses a
// client or cluster address beyond loopback without --nats-token-file, before anything
// starts, unless --cluster-insecure accepts the exposure (with a warning in the log).
// Loopback addresses, a token, or an existing deployment (--nats) need nothing more.
func TestClusterBeyondLoopbackNeedsAToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("beyond-loopback-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	e := &env{log: slog.New(slog.NewTextHandler(&logged, nil))}
	usage := func(err error) bool {
		var ee *exitError
		return errors.As(err, &ee) && ee.code == exitUsage
	}
	for _, f := range []clusterFlags{
		{clusterListen: "0.0.0.0:6222"},
		{clusterListen: ":6222"},
		{listen: "10.1.2.3:4222"},
		{listen: "127.0.0.1:4222", clusterListen: "[::]:6222", routes: "10.0.0.2:6222"},
	} {
		f.on = true
		_, err := f.options(e)
		if !usage(err) || !strings.Contains(err.Error(), "--nats-token-file") || !strings.Contains(err.Error(), "--cluster-insecure") {
			t.Errorf("%+v without a token: %v, want a usage error naming --nats-token-file and --cluster-insecure", f, err)
		}
		f.tokenFile = tokenFile
		if o, err := f.options(e); err != nil || o.Token == "" {
			t.Errorf("%+v with a token: %v", f, err)
		}
		f.tokenFile, f.insecure = "", true
		logged.Reset()
		if _, err := f.options(e); err != nil || !strings.Contains(logged.String(), "without a cluster token") {
			t.Errorf("%+v with --cluster-insecure: %v, log %q", f, err, logged.String())
		}
	}
	for _, f := range []clusterFlags{
		{},
		{listen: "127.0.0.1:4222", clusterListen: "127.0.0.1:6222", routes: "127.0.0.1:6223"},
		{listen: "[::1]:4222", clusterListen: "localhost:6222"},
		{natsURL: "nats://nats.internal:4222"},
	} {
		f.on = true
		if _, err := f.options(e); err != nil {
			t.Errorf("%+v: %v, want no refusal", f, err)
		}
	}
}
