package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentlibos/libos/store"
)

// netsplit carries the routes of a test cluster through one TCP proxy per server (its
// advertised cluster address), so that a test can cut and heal the link between two
// servers for real: open connections are closed, new ones are closed once the proxy
// has read who is connecting (the server name in the route's INFO line).
type netsplit struct {
	mu    sync.Mutex
	names map[string]int // server name → member index
	cut   map[[2]int]bool
	conns map[*splitConn]bool
	ls    []net.Listener
	wg    sync.WaitGroup
}

type splitConn struct {
	from, to int // from is -1 until the proxy has read the route's INFO
	a, b     net.Conn
}

func link(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}

func newNetsplit() *netsplit {
	return &netsplit{names: map[string]int{}, cut: map[[2]int]bool{}, conns: map[*splitConn]bool{}}
}

// proxy starts the proxy in front of member to's cluster address target and returns
// its address.
func (n *netsplit) proxy(t testing.TB, to int, name, target string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.names[name] = to
	n.ls = append(n.ls, l)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.wg.Add(1)
			go func() { defer n.wg.Done(); n.serve(c, to, target) }()
		}
	}()
	return l.Addr().String()
}

func (n *netsplit) serve(a net.Conn, to int, target string) {
	b, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		a.Close()
		return
	}
	sc := &splitConn{from: -1, to: to, a: a, b: b}
	n.mu.Lock()
	if n.conns == nil { // closed
		n.mu.Unlock()
		a.Close()
		b.Close()
		return
	}
	n.conns[sc] = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.conns, sc)
		n.mu.Unlock()
		a.Close()
		b.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(a, b); a.Close(); done <- struct{}{} }()
	// The soliciting server sends CONNECT, then INFO with its name: read up to it,
	// forward what was read, then copy.
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(a)
	for sc.from < 0 {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := b.Write([]byte(line)); err != nil {
			return
		}
		if rest, ok := strings.CutPrefix(line, "INFO "); ok {
			var info struct {
				Name string `json:"server_name"`
			}
			if json.Unmarshal([]byte(rest), &info) != nil {
				return
			}
			n.mu.Lock()
			from, known := n.names[info.Name]
			if !known || n.cut[link(from, to)] {
				n.mu.Unlock()
				return
			}
			sc.from = from
			n.mu.Unlock()
		}
	}
	a.SetReadDeadline(time.Time{})
	go func() { io.Copy(b, r); b.Close(); done <- struct{}{} }()
	<-done
}

// partition cuts every link of member i; heal restores them.
func (n *netsplit) partition(i, members int) {
	for j := 0; j < members; j++ {
		if j != i {
			n.setCut(i, j, true)
		}
	}
}

func (n *netsplit) heal(i, members int) {
	for j := 0; j < members; j++ {
		if j != i {
			n.setCut(i, j, false)
		}
	}
}

func (n *netsplit) setCut(i, j int, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link(i, j)] = cut
	if !cut {
		return
	}
	for sc := range n.conns {
		if sc.from >= 0 && link(sc.from, sc.to) == link(i, j) || sc.from < 0 && (sc.to == i || sc.to == j) {
			sc.a.Close()
			sc.b.Close()
		}
	}
}

func (n *netsplit) close() {
	n.mu.Lock()
	for _, l := range n.ls {
		l.Close()
	}
	for sc := range n.conns {
		sc.a.Close()
		sc.b.Close()
	}
	n.conns = nil
	n.mu.Unlock()
	n.wg.Wait()
}

// tmember is one host of a test cluster: its embedded server (routes through the
// netsplit), its node and its replicated store. It can be killed and started again
// on the same directories and addresses.
type tmember struct {
	name, jsDir, storeDir string
	client, clusterAddr   string
	advertise             string
	routes                []string

	srv  *Server
	node *Node
	st   *store.Store
	up   bool
}

// tcluster is a test cluster of hosts whose routes can be cut.
type tcluster struct {
	t   testing.TB
	cfg Config // the nodes' Config, without Host and URL
	net *netsplit
	ms  []*tmember
}

// newTCluster starts n hosts routed to each other through a netsplit. cfg is every
// node's configuration (Host and URL are set per host).
func newTCluster(t testing.TB, n int, cfg Config) *tcluster {
	c := &tcluster{t: t, cfg: cfg, net: newNetsplit()}
	clients, routes := loopbackAddrs(t, n), loopbackAddrs(t, n)
	for i := 0; i < n; i++ {
		m := &tmember{name: fmt.Sprintf("m%d", i), jsDir: filepath.Join(t.TempDir(), "js"), storeDir: filepath.Join(t.TempDir(), "store"),
			client: clients[i], clusterAddr: routes[i]}
		m.advertise = c.net.proxy(t, i, m.name, m.clusterAddr)
		c.ms = append(c.ms, m)
	}
	for i, m := range c.ms {
		for j, o := range c.ms {
			if j != i {
				m.routes = append(m.routes, o.advertise)
			}
		}
	}
	t.Cleanup(func() {
		for i := range c.ms {
			c.kill(i)
		}
		c.net.close()
	})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range c.ms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.start(i) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// start starts member i: its server, its node (waiting for the stream to answer) and
// its store, then has the node apply the stream.
func (c *tcluster) start(i int) error {
	m := c.ms[i]
	sc := ServerConfig{Name: m.name, Dir: m.jsDir, Listen: m.client}
	if len(c.ms) > 1 {
		sc.ClusterListen, sc.ClusterAdvertise, sc.Routes = m.clusterAddr, m.advertise, m.routes
	}
	srv, err := StartServer(sc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := c.cfg
	cfg.Host, cfg.URL = m.name, srv.ClientURL()
	node, err := Connect(ctx, cfg)
	if err != nil {
		srv.Shutdown()
		return err
	}
	st, err := store.Open(m.storeDir, store.Options{Replicator: node})
	if err != nil {
		node.Abandon()
		srv.Shutdown()
		return err
	}
	node.Start(st, nil)
	m.srv, m.node, m.st, m.up = srv, node, st, true
	return nil
}

// kill stops member i as a crash would: its node gives up nothing, its server stops.
func (c *tcluster) kill(i int) {
	m := c.ms[i]
	if !m.up {
		return
	}
	m.up = false
	m.node.Abandon()
	m.st.Close()
	m.srv.Shutdown()
}

// lastSeq asks member i's stream for its last sequence, retrying within d (a stream
// electing a leader does not answer).
func (c *tcluster) lastSeq(i int, d time.Duration) (uint64, error) {
	var last uint64
	err := retryFor(d, func(ctx context.Context) error {
		info, err := c.ms[i].node.stream.Info(ctx)
		if err != nil {
			return err
		}
		last = info.State.LastSeq
		return nil
	})
	return last, err
}

// settle waits until every member that is up has applied the stream to its end (the
// highest last sequence any of them reports: a member just back from a partition may
// report its own stale view first).
func (c *tcluster) settle(d time.Duration) error {
	var last uint64
	for i, m := range c.ms {
		if !m.up {
			continue
		}
		l, err := c.lastSeq(i, d)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		last = max(last, l)
	}
	for _, m := range c.ms {
		if !m.up {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := m.node.waitApplied(ctx, last)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// retryFor runs fn until it succeeds or d has passed, each try bounded by 2s.
func retryFor(d time.Duration, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tokenWriters reads every message of the stream through member i and returns, per
// process and fencing token, the hosts that wrote at it.
func (c *tcluster) tokenWriters(i int) (map[string]map[string]bool, error) {
	last, err := c.lastSeq(i, 30*time.Second)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	for seq := uint64(1); seq <= last; seq++ {
		var h nats.Header
		err := retryFor(10*time.Second, func(ctx context.Context) error {
			m, err := c.ms[i].node.stream.GetMsg(ctx, seq)
			if err != nil {
				return err
			}
			h = m.Header
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", seq, err)
		}
		tok := h.Get(HeaderPID) + "@" + h.Get(HeaderEpoch)
		if out[tok] == nil {
			out[tok] = map[string]bool{}
		}
		out[tok][h.Get(HeaderHost)] = true
	}
	return out, nil
}
