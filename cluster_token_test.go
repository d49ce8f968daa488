package libos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/cluster"
)

// ClusterOptions.Token: "the embedded server takes only clients, routes and leaf nodes
// that present it, and this host presents it to the server it talks to". A host opened
// with a token serves through its own server, which refuses a client without it; a
// token that cannot be one is invalid_config before anything starts, and the error
// does not show it.
func TestOpenWithClusterToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	const token = "open-cluster-token-0123456789abcdef"
	listen := freePorts(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sys, err := libos.Open(ctx, t.TempDir(), libos.Options{Cluster: &libos.ClusterOptions{
		Host: "solo", Listen: listen, Replicas: 1, Token: token, LeaseTTL: testLeaseTTL,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if sys.Cluster() == nil {
		t.Fatal("no cluster node")
	}
	if _, err := nats.Connect("nats://" + listen); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without the token: %v, want an authorization violation", err)
	}
	nc, err := nats.Connect("nats://"+listen, nats.Token(token))
	if err != nil {
		t.Fatalf("a client with the token: %v", err)
	}
	nc.Close()

	const bad = "too short"
	_, err = libos.Open(ctx, t.TempDir(), libos.Options{Cluster: &libos.ClusterOptions{Host: "other", Listen: freePorts(t, 1)[0], Replicas: 1, Token: bad}})
	if !errors.Is(err, cluster.ErrInvalidConfig) || strings.Contains(err.Error(), bad) {
		t.Fatalf("a token that cannot be one: %v, want invalid_config without the token", err)
	}
}
