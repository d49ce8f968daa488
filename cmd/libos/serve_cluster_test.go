package main

import (
	"errors"
	"maps"
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
