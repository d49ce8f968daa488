package main

import (
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
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
