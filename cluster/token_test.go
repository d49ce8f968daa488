package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentlibos/libos/liberr"
)

// ServerConfig.Token: "every connection to the server must present it: clients as
// their token, the other hosts' routes and leaf nodes as the password of the user
// RouteUser. Without it the server takes any connection that reaches its ports, and
// whoever reaches them can write any process's log."
//
// A cluster whose hosts share a token replicates as before; a client without it, or
// with another, is refused before it can publish anything; a server that does not
// know it never becomes a route of the cluster; a node given a wrong token fails at
// once with replication_failed, and no error holds the token.
func TestTokenKeepsStrangersOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four NATS servers")
	}
	const token = "s3cret:@/%2F#?+token-0123456789" // URL-reserved bytes: routes carry it in user information
	ctx := context.Background()
	ms := threeMembersWithToken(t, 2*time.Second, token)
	a, b := ms[0], ms[1]

	// The hosts' own traffic goes through.
	const pid = "pid_tokened"
	if _, err := a.st.Append(ctx, pid, "note", json.RawMessage(`{"by":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if err := retryFor(20*time.Second, func(context.Context) error {
		evs, err := b.st.Events(pid, 0, 0)
		if err != nil || len(evs) != 1 {
			return errors.New("not replicated yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("a host's append did not reach another host: %v", err)
	}

	// Clients without the token, or with another, are refused at connect.
	url := a.srv.ClientURL()
	for _, opts := range [][]nats.Option{nil, {nats.Token("s3cret-cluster-token-0123456780")}, {nats.UserInfo(RouteUser, token)}} {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			// Refused or not, nothing may be published under the stream.
			perr := nc.Publish(DefaultSubject+"."+pid, []byte("forged"))
			nc.Close()
			t.Fatalf("a client without the token connected (publish: %v)", perr)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("a client without the token: %v, want an authorization violation", err)
		}
	}
	nc, err := nats.Connect(url, nats.Token(token))
	if err != nil {
		t.Fatalf("a client with the token: %v", err)
	}
	nc.Close()

	// ps reads with the token and is refused without it.
	if _, err := ReadPlacementsWithToken(ctx, url, "", token); err != nil {
		t.Fatalf("placements with the token: %v", err)
	}
	_, err = ReadPlacements(ctx, url, "")
	if !errors.Is(err, ErrReplicationFailed) {
		t.Fatalf("placements without the token: %v, want replication_failed", err)
	}

	// A node given a wrong token fails at once, with a reason, and never shows a token.
	wrong := "another-token-of-enough-length"
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = Connect(cctx, Config{Host: "intruder", URL: url, Token: wrong})
	cancel()
	if !errors.Is(err, ErrReplicationFailed) || !strings.Contains(err.Error(), refusedText) {
		t.Fatalf("a node with a wrong token: %v, want replication_failed naming the refused credentials", err)
	}
	for _, s := range errorTexts(err) {
		if strings.Contains(s, wrong) || strings.Contains(s, token) {
			t.Fatalf("an error shows a token: %q", s)
		}
	}

	// A server that does not know the token routes to the cluster and is refused: it
	// gets no route, and the cluster's servers keep only their own two.
	for _, stranger := range []string{"", "yet-another-token-of-length"} {
		addr := loopbackAddrs(t, 2)
		srv, err := StartServer(ServerConfig{Name: "stranger", Dir: filepath.Join(t.TempDir(), "js"), Listen: addr[0],
			ClusterListen: addr[1], Routes: []string{a.srv.ClusterAddr()}, Token: stranger})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the stranger dials its route at once, and again
		n := srv.s.NumRoutes()
		var joined []int
		for i, m := range ms {
			rz, err := m.srv.s.Routez(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rz.Routes {
				if r.RemoteName == "stranger" {
					joined = append(joined, i)
				}
			}
		}
		srv.Shutdown()
		if n != 0 || len(joined) != 0 {
			t.Fatalf("a server with token %q got %d route connections into the cluster (members %v route to it)", stranger, n, joined)
		}
	}
}

// CheckToken: "MinTokenBytes to MaxTokenBytes of printable ASCII without spaces. The
// error never holds the token." A token beside a URL with credentials is refused too.
func TestTokenForm(t *testing.T) {
	for _, bad := range []string{"short", strings.Repeat("x", MaxTokenBytes+1), "a token with spaces in it", "tab\tseparated-token-xx", "non-ascii-tökenxxxxxxxx", "line\nbreak-token-xxxxxxx"} {
		err := CheckToken(bad)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("CheckToken(%q): %v, want invalid_config", bad, err)
		}
		if len(bad) >= 8 && strings.Contains(err.Error(), bad) {
			t.Fatalf("the error shows the token: %v", err)
		}
		if _, err := StartServer(ServerConfig{Dir: t.TempDir(), Listen: "127.0.0.1:0", Token: bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("StartServer with token %q: %v, want invalid_config", bad, err)
		}
	}
	if err := CheckToken(strings.Repeat("k", MinTokenBytes)); err != nil {
		t.Fatal(err)
	}
	const token = "a-good-token-of-enough-bytes"
	_, err := Connect(context.Background(), Config{Host: "h", URL: "nats://u:p@127.0.0.1:1", Token: token})
	if !errors.Is(err, ErrInvalidConfig) || strings.Contains(err.Error(), "u:p") {
		t.Fatalf("a token beside URL credentials: %v, want invalid_config without the credentials", err)
	}
	_, err = ReadPlacementsWithToken(context.Background(), "nats://127.0.0.1:1,nats://tok@127.0.0.1:2", "", token)
	if liberr.CodeOf(err) != CodeInvalidConfig {
		t.Fatalf("a token beside URL credentials: %v, want invalid_config", err)
	}
}

// ServerConfig.Token on leaf nodes: a hub with a token takes the leaf connection of an
// edge that presents it (as RouteUser's password), and refuses one that does not.
func TestTokenOnLeafNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	const token = "leaf:@/%41#?&=token-0123456789" // URL-reserved bytes, as on routes
	addrs := loopbackAddrs(t, 4)
	hub, err := StartServer(ServerConfig{Name: "hub", Dir: filepath.Join(t.TempDir(), "hub"), Listen: addrs[0], LeafListen: addrs[1], Domain: "hub", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Shutdown()
	edge, err := StartServer(ServerConfig{Name: "edge", Dir: filepath.Join(t.TempDir(), "edge"), Listen: addrs[2],
		LeafRemotes: []string{"nats-leaf://" + addrs[1]}, Domain: "edge", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Shutdown()
	if err := retryFor(20*time.Second, func(context.Context) error {
		if hub.s.NumLeafNodes() != 1 || edge.s.NumLeafNodes() != 1 {
			return errors.New("no leaf connection yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("an edge with the token: %v", err)
	}
	stranger, err := StartServer(ServerConfig{Name: "stranger", Dir: filepath.Join(t.TempDir(), "stranger"), Listen: addrs[3],
		LeafRemotes: []string{"nats-leaf://" + addrs[1]}, Domain: "stranger"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the stranger dials the hub at once, and again
	n := stranger.s.NumLeafNodes()
	stranger.Shutdown()
	if n != 0 || hub.s.NumLeafNodes() != 1 {
		t.Fatalf("a leaf node without the token connected: stranger %d, hub %d leaf connections", n, hub.s.NumLeafNodes())
	}
}

// ServerConfig.Exposed: "the addresses cfg has its server listen on beyond loopback:
// every interface, or a host that is, or resolves to, an address other than loopback".
func TestExposedAddresses(t *testing.T) {
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{}, ""},
		{ServerConfig{Listen: "127.0.0.1:0", ClusterListen: "[::1]:6222", LeafListen: "localhost:7422"}, ""},
		{ServerConfig{Listen: "0.0.0.0:4222"}, "0.0.0.0:4222"},
		{ServerConfig{ClusterListen: ":6222"}, ":6222"},
		{ServerConfig{Listen: "127.0.0.1:4222", ClusterListen: "10.0.0.1:6222", LeafListen: "[::]:7422"}, "10.0.0.1:6222 [::]:7422"},
	} {
		if got := strings.Join(tc.cfg.Exposed(), " "); got != tc.want {
			t.Errorf("%+v: exposed %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
