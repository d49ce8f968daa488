package cluster

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentlibos/libos/internal/loopback"
)

// ServerConfig configures the NATS server a host embeds: JetStream on its own
// directory, a client port for this host (and for tools such as the nats CLI), and a
// cluster port with routes to the other hosts; three hosts routed to each other form
// the Raft group that an R3 stream needs.
type ServerConfig struct {
	// Name is the server's name, unique in the cluster (the host's name by default).
	Name string
	// Dir holds JetStream's files. Required.
	Dir string
	// Listen is the client address, host:port ("127.0.0.1:0" picks a free port).
	Listen string
	// ClusterName names the cluster; every host of it uses the same ("libos" by default).
	ClusterName string
	// ClusterListen is the address other servers route to, host:port. Empty: no
	// cluster (a single server, R1 streams only).
	ClusterListen string
	// Routes are the other servers' cluster addresses (host:port or nats-route://…).
	Routes []string
	// ClusterAdvertise is the address other servers are told to route to, when it is
	// not ClusterListen (behind NAT, a port forward or a proxy).
	ClusterAdvertise string
	// LeafRemotes are hub URLs (nats-leaf://host:port) this server connects to as a
	// leaf node; LeafListen is the address leaf nodes connect to on a hub.
	LeafRemotes []string
	LeafListen  string
	// Domain is the server's JetStream domain. A leaf node with its own domain keeps
	// its streams (and so its processes' logs) on its own: it serves while the hub is
	// away; the hub reaches them as $JS.<Domain>.API (a mirror or a source).
	Domain string
	// SyncAlways makes JetStream sync every write to disk before acknowledging it
	// (otherwise durability comes from replication and a periodic sync).
	SyncAlways bool
	// MaxPayload bounds one message (and so one write batch); 0 means 8 MiB.
	MaxPayload int32
	// Token, when set, is the secret every connection to the server must present:
	// clients as their token (Config.Token, `libos ps --nats-token-file`), the other
	// hosts' routes and leaf nodes as the password of the user RouteUser, which this
	// server also presents on the routes and leaf connections it makes. Every host of
	// a cluster is given the same. Without it the server takes any connection that
	// reaches its ports, and whoever reaches them can write any process's log.
	// CheckToken says what a token may be.
	Token string
}

// RouteUser is the user name a server with a Token presents, and asks for, on routes
// and leaf node connections; the token is its password.
const RouteUser = "libos"

// Bounds of a Token: long enough not to be guessed, printable ASCII without spaces so
// that a token file's line is the token.
const (
	MinTokenBytes = 16
	MaxTokenBytes = 1024
)

// CheckToken says whether t can be a Token: MinTokenBytes to MaxTokenBytes of
// printable ASCII without spaces. The error never holds the token.
func CheckToken(t string) error {
	if len(t) < MinTokenBytes || len(t) > MaxTokenBytes {
		return errorf(CodeInvalidConfig, nil, "the cluster token is %d bytes; it must be %d to %d", len(t), MinTokenBytes, MaxTokenBytes)
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return errorf(CodeInvalidConfig, nil, "the cluster token holds a byte that is not printable ASCII (or a space) at offset %d", i)
		}
	}
	return nil
}

// Exposed lists the addresses cfg has its server listen on beyond loopback (the client,
// cluster and leaf node addresses): every interface, or a host that is, or resolves to,
// an address other than loopback. A server with such an address and no Token takes
// whoever reaches it. An address that is not host:port is listed as it is.
func (cfg ServerConfig) Exposed() []string {
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	var out []string
	for _, a := range []string{listen, cfg.ClusterListen, cfg.LeafListen} {
		if a == "" {
			continue
		}
		if h, _, err := net.SplitHostPort(a); err != nil || !loopback.Host(h) {
			out = append(out, a)
		}
	}
	return out
}

// withUser gives each URL the route user and token, unless it names a user of its own.
func withUser(us []*url.URL, token string) {
	for _, u := range us {
		if u.User == nil {
			u.User = url.UserPassword(RouteUser, token)
		}
	}
}

// DefaultListen is the client address of an embedded server whose Listen is empty.
const DefaultListen = "127.0.0.1:4222"

// DefaultMaxPayload is the message bound of an embedded server.
const DefaultMaxPayload = 8 << 20

// Server is an embedded NATS server.
type Server struct {
	s *server.Server
}

func hostPort(addr, what string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errorf(CodeInvalidConfig, err, "%s %q is not host:port", what, addr)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, errorf(CodeInvalidConfig, err, "%s %q has no usable port", what, addr)
	}
	return h, n, nil
}

func urls(list []string, scheme, what string) ([]*url.URL, error) {
	var out []*url.URL
	for _, r := range list {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !strings.Contains(r, "://") {
			r = scheme + "://" + r
		}
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return nil, errorf(CodeInvalidConfig, redactCause(err, r), "%s %q is not a URL", what, RedactURL(r))
		}
		out = append(out, u)
	}
	return out, nil
}

// StartServer starts an embedded NATS server with JetStream and waits until it takes
// connections.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errorf(CodeInvalidConfig, nil, "the embedded server needs a directory for JetStream")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "libos"
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.Token != "" {
		if err := CheckToken(cfg.Token); err != nil {
			return nil, err
		}
	}
	h, p, err := hostPort(cfg.Listen, "listen address")
	if err != nil {
		return nil, err
	}
	o := &server.Options{
		ServerName:      cfg.Name,
		Host:            h,
		Port:            p,
		JetStream:       true,
		JetStreamDomain: cfg.Domain,
		StoreDir:        cfg.Dir,
		SyncAlways:      cfg.SyncAlways,
		MaxPayload:      cfg.MaxPayload,
		NoSigs:          true,
		NoLog:           true,
	}
	if cfg.ClusterListen != "" {
		ch, cp, err := hostPort(cfg.ClusterListen, "cluster listen address")
		if err != nil {
			return nil, err
		}
		o.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: ch, Port: cp,
			// Clients are not told about the other servers (a host's node talks to
			// its own). Servers do learn each other's advertised cluster address by
			// gossip, and skip those they have a configured route to: with every
			// host routed to every other, the routes are exactly those configured.
			NoAdvertise: true, Advertise: cfg.ClusterAdvertise}
		if o.Routes, err = urls(cfg.Routes, "nats-route", "route"); err != nil {
			return nil, err
		}
	} else if len(cfg.Routes) > 0 || cfg.ClusterAdvertise != "" {
		return nil, errorf(CodeInvalidConfig, nil, "routes need a cluster listen address")
	}
	if cfg.LeafListen != "" {
		lh, lp, err := hostPort(cfg.LeafListen, "leaf listen address")
		if err != nil {
			return nil, err
		}
		o.LeafNode.Host, o.LeafNode.Port = lh, lp
	}
	if len(cfg.LeafRemotes) > 0 {
		us, err := urls(cfg.LeafRemotes, "nats-leaf", "leaf remote")
		if err != nil {
			return nil, err
		}
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: us}}
	}
	if cfg.Token != "" {
		// Clients present the token; routes and leaf nodes present it as RouteUser's
		// password, both ways.
		o.Authorization = cfg.Token
		if cfg.ClusterListen != "" {
			o.Cluster.Username, o.Cluster.Password = RouteUser, cfg.Token
			withUser(o.Routes, cfg.Token)
		}
		if cfg.LeafListen != "" {
			o.LeafNode.Username, o.LeafNode.Password = RouteUser, cfg.Token
		}
		for _, r := range o.LeafNode.Remotes {
			withUser(r.URLs, cfg.Token)
		}
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, errorf(CodeInvalidConfig, err, "embedded NATS server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errorf(CodeReplicationFailed, nil, "embedded NATS server did not start listening on %s", cfg.Listen)
	}
	return &Server{s: s}, nil
}

// ClientURL is the URL a client of this server connects to.
func (s *Server) ClientURL() string { return s.s.ClientURL() }

// ClusterAddr is the address the server's routes listen on, or "" without a cluster.
func (s *Server) ClusterAddr() string {
	if a := s.s.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Shutdown stops the server; its clients are disconnected.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

func (s *Server) String() string { return fmt.Sprintf("nats-server %s", s.s.Name()) }
