package libos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentlibos/libos/cluster"
	"github.com/agentlibos/libos/store"
)

// ClusterOptions turns on the replicated mode (see CLUSTER.md): every durable write
// batch of a process goes to a NATS JetStream stream before it is acknowledged, a
// process is served by the one host holding its lease, and another host takes it over
// when that host is lost. The local store stays the source of reads.
type ClusterOptions struct {
	// Host names this host in the cluster (leases, `libos ps`); the machine's host
	// name by default.
	Host string
	// NATSURL joins an existing NATS deployment (JetStream enabled) instead of
	// embedding a server.
	NATSURL string
	// The embedded server: its client address (127.0.0.1:4222 by default), its
	// cluster address and routes to the other hosts' cluster addresses, and its
	// JetStream directory (the store's directory + "/jetstream" by default).
	Listen        string
	ClusterListen string
	Routes        []string
	NATSDir       string
	// LeafRemotes makes the embedded server a leaf node of these hubs; Domain is its
	// JetStream domain (an edge host's own, so that its stream stays local and the
	// hub reaches it as $JS.<Domain>.API, see CLUSTER.md).
	LeafRemotes []string
	Domain      string
	// SyncAlways makes the embedded server sync every JetStream write to disk before
	// acknowledging it.
	SyncAlways bool
	// Token is the cluster's shared secret (cluster.ServerConfig.Token): the embedded
	// server takes only clients, routes and leaf nodes that present it, and this host
	// presents it to the server it talks to (the embedded one, or NATSURL's). Every
	// host of a cluster is given the same. Empty: the embedded server takes any
	// connection that reaches its ports. cluster.CheckToken says what it may be.
	Token string
	// Replicas of the stream: 3 by default, 1 for a single host.
	Replicas int
	// LeaseTTL: how long a lost host's processes wait before another host takes them
	// (cluster.DefaultLeaseTTL by default).
	LeaseTTL time.Duration
	// Serve picks the processes this host may take over; nil: all.
	Serve func(pid string) bool
	// ServeLabels narrows them to the processes whose image carries every one of
	// these process labels (the manifest's process_labels); empty: no narrowing.
	// Processes spawned on this host are served here regardless.
	ServeLabels map[string]string
	// Logf receives the node's own reports (takeovers, lost leases).
	Logf func(format string, args ...any)
}

// clusterHost is what a System in the replicated mode runs besides the libOS.
type clusterHost struct {
	node   *cluster.Node
	server *cluster.Server
	// st is the host's store, set once it is open (before the node starts); serves
	// reads process records from it.
	st *store.Store
}

var hostChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]`) })

// startCluster starts (or joins) the NATS server and connects the node.
func startCluster(ctx context.Context, dir string, o *ClusterOptions) (*clusterHost, error) {
	host := o.Host
	if host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "libos"
		}
		host = hostChars().ReplaceAllString(strings.SplitN(h, ".", 2)[0], "-")
	}
	c := &clusterHost{}
	url := o.NATSURL
	if url == "" {
		nd := o.NATSDir
		if nd == "" {
			nd = filepath.Join(dir, "jetstream")
		}
		srv, err := cluster.StartServer(cluster.ServerConfig{Name: host, Dir: nd, Listen: o.Listen,
			ClusterListen: o.ClusterListen, Routes: o.Routes, LeafRemotes: o.LeafRemotes, Domain: o.Domain,
			SyncAlways: o.SyncAlways, Token: o.Token})
		if err != nil {
			return nil, fmt.Errorf("libos: cluster: %w", err)
		}
		c.server, url = srv, srv.ClientURL()
	}
	serve := o.Serve
	if len(o.ServeLabels) > 0 {
		serve = func(pid string) bool { return c.serves(pid, o.Serve, o.ServeLabels) }
	}
	node, err := cluster.Connect(ctx, cluster.Config{Host: host, URL: url, Token: o.Token, Replicas: o.Replicas,
		LeaseTTL: o.LeaseTTL, Serve: serve, Logf: o.Logf})
	if err != nil {
		if c.server != nil {
			c.server.Shutdown()
		}
		return nil, fmt.Errorf("libos: cluster: %w", err)
	}
	c.node = node
	return c, nil
}

// serves reports whether this host may take pid over: its image's process labels hold
// every one of labels, and serve (when set) accepts it. A process whose record cannot
// be read is not taken.
func (c *clusterHost) serves(pid string, serve func(string) bool, labels map[string]string) bool {
	if c.st == nil {
		return false
	}
	p, err := c.st.Process(pid)
	if err != nil {
		return false
	}
	// The record is the kernel's: the image under "image".
	var rec struct {
		Image struct {
			Labels map[string]string `json:"process_labels"`
		} `json:"image"`
	}
	if len(p.Image) > 0 && json.Unmarshal(p.Image, &rec) != nil {
		return false
	}
	for k, v := range labels {
		if have, ok := rec.Image.Labels[k]; !ok || have != v {
			return false
		}
	}
	return serve == nil || serve(pid)
}

func (c *clusterHost) storeOptions() store.Options {
	if c == nil {
		return store.Options{}
	}
	return store.Options{Replicator: c.node}
}

func (c *clusterHost) close() error {
	if c == nil {
		return nil
	}
	err := c.node.Close()
	if c.server != nil {
		c.server.Shutdown()
	}
	return err
}

// Cluster is the System's membership in a cluster, nil when it runs on one host.
func (s *System) Cluster() *cluster.Node {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.node
}

// Placement is where a process is served in the replicated mode.
type Placement = cluster.Placement

// Placements lists where each process is served (the host holding its lease); nil on
// one host.
func (s *System) Placements(ctx context.Context) ([]Placement, error) {
	if s.cluster == nil {
		return nil, nil
	}
	return s.cluster.node.Placements(ctx)
}

// crash stops the System as a machine loss would: the node stops without giving up
// its leases, the embedded server stops, the kernel and the store are left as they
// are. Only tests call it.
func (s *System) crash() {
	if s.cluster != nil {
		s.cluster.node.Abandon()
		if s.cluster.server != nil {
			s.cluster.server.Shutdown()
		}
	}
	s.Kernel.Close()
}
