package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	los "github.com/agentlibos/libos"
	"github.com/agentlibos/libos/cluster"
)

// clusterFlags are serve's flags of the replicated mode (CLUSTER.md).
type clusterFlags struct {
	on            bool
	host          string
	listen        string
	clusterListen string
	routes        string
	natsURL       string
	natsDir       string
	leafRemotes   string
	replicas      int
	leaseTTL      time.Duration
	syncAlways    bool
	serveLabels   string
	natsDomain    string
	tokenFile     string
	insecure      bool
}

func addClusterFlags(c *cobra.Command, f *clusterFlags) {
	fl := c.Flags()
	fl.BoolVar(&f.on, "cluster", false, "replicated mode: every write goes to a NATS JetStream stream first; processes survive the loss of this host (see CLUSTER.md)")
	fl.StringVar(&f.host, "cluster-host", "", "this host's name in the cluster (default: the machine's host name)")
	fl.StringVar(&f.listen, "nats-listen", "", "client address of the embedded NATS server (default 127.0.0.1:4222)")
	fl.StringVar(&f.clusterListen, "cluster-listen", "", "address the embedded NATS server's routes listen on (host:port)")
	fl.StringVar(&f.routes, "cluster-routes", "", "the other hosts' cluster addresses, comma-separated (host:port,...)")
	fl.StringVar(&f.natsURL, "nats", "", "join an existing NATS deployment (JetStream enabled) at URL instead of embedding a server")
	fl.StringVar(&f.natsDir, "nats-dir", "", "JetStream directory of the embedded server (default: DATA/jetstream)")
	fl.StringVar(&f.leafRemotes, "leaf-remotes", "", "run the embedded server as a leaf node of these hubs (nats-leaf://host:port,...)")
	fl.IntVar(&f.replicas, "replicas", 0, "replicas of the stream: 3 (default) or 1 for a single host")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 0, "how long a lost host's processes wait before another host takes them (default 10s)")
	fl.BoolVar(&f.syncAlways, "nats-sync-always", false, "the embedded server syncs every JetStream write to disk before acknowledging it")
	fl.StringVar(&f.serveLabels, "serve-labels", "", "take over only the processes whose image has these process_labels (k=v,...); default: every process")
	fl.StringVar(&f.tokenFile, "nats-token-file", "", "file holding the cluster's shared token (one line, 16 to 1024 printable ASCII bytes): the embedded server takes only clients, routes and leaf nodes that present it, and this host presents it (see CLUSTER.md)")
	fl.BoolVar(&f.insecure, "cluster-insecure", false, "run the embedded NATS server on an address beyond loopback without a cluster token anyway (anyone who reaches it can write any process's log)")
	fl.StringVar(&f.natsDomain, "nats-domain", "", "JetStream domain of the embedded server (an edge leaf node's own domain, see CLUSTER.md)")
}

// labelKey and labelValue are the forms of the image's process_labels.
var (
	labelKey   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`) })
	labelValue = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._/-]{0,63}$`) })
)

// parseLabels reads k=v,... into a map; every key at most once.
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !labelKey().MatchString(k) || !labelValue().MatchString(v) {
			return nil, usageErr("--serve-labels: %q is not key=value (key %s, value %s)", kv, labelKey(), labelValue())
		}
		if _, dup := out[k]; dup {
			return nil, usageErr("--serve-labels: key %q given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// options returns the System's cluster options, nil without --cluster.
func (f clusterFlags) options(e *env) (*los.ClusterOptions, error) {
	used := f.host != "" || f.listen != "" || f.clusterListen != "" || f.routes != "" || f.natsURL != "" ||
		f.natsDir != "" || f.leafRemotes != "" || f.replicas != 0 || f.leaseTTL != 0 || f.syncAlways ||
		f.serveLabels != "" || f.natsDomain != "" || f.tokenFile != "" || f.insecure
	if !f.on {
		if used {
			return nil, usageErr("the cluster flags need --cluster")
		}
		return nil, nil
	}
	if f.natsURL != "" && (f.listen != "" || f.clusterListen != "" || f.routes != "" || f.leafRemotes != "" || f.natsDomain != "") {
		return nil, usageErr("--nats joins an existing NATS deployment: it does not go with the embedded server's --nats-listen, --cluster-listen, --cluster-routes, --leaf-remotes or --nats-domain")
	}
	labels, err := parseLabels(f.serveLabels)
	if err != nil {
		return nil, err
	}
	token, err := readClusterToken(f.tokenFile)
	if err != nil {
		return nil, err
	}
	// The embedded server beyond loopback takes only the hosts' token, as HTTP beyond
	// loopback takes only authenticated clients: without one, whoever reaches the port
	// can write any process's log.
	if exposed := (cluster.ServerConfig{Listen: f.listen, ClusterListen: f.clusterListen}).Exposed(); f.natsURL == "" && token == "" && len(exposed) > 0 {
		if !f.insecure {
			return nil, usageErr("refusing to run the embedded NATS server on %s, beyond loopback, without a cluster token: give every host the same --nats-token-file, bind 127.0.0.1, or accept the exposure explicitly (--cluster-insecure)", strings.Join(exposed, ", "))
		}
		if e.log != nil {
			e.log.Warn("the embedded NATS server listens beyond loopback without a cluster token, as --cluster-insecure asks: anyone who reaches it can write any process's log", "addrs", strings.Join(exposed, ", "))
		}
	}
	return &los.ClusterOptions{Host: f.host, Token: token, NATSURL: f.natsURL, Listen: f.listen, ClusterListen: f.clusterListen,
		Routes: splitList(f.routes), NATSDir: f.natsDir, LeafRemotes: splitList(f.leafRemotes), Replicas: f.replicas,
		LeaseTTL: f.leaseTTL, SyncAlways: f.syncAlways, ServeLabels: labels, Domain: f.natsDomain,
		Logf: func(format string, args ...any) { e.log.Info("cluster", "event", fmt.Sprintf(format, args...)) }}, nil
}

// readClusterToken reads the cluster's token from file ("" without one): the file's
// first line, without its line ending, and nothing after it. The token is never
// shown: an error names the file and what is wrong.
func readClusterToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", usageErr("--nats-token-file: %v", err)
	}
	defer f.Close()
	// A token file is one short line: reading stops past what one can hold (a path
	// such as /dev/zero given by mistake never ends).
	const most = cluster.MaxTokenBytes + 2
	data, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return "", usageErr("--nats-token-file: %v", err)
	}
	if len(data) > most {
		return "", usageErr("--nats-token-file %s: the file is longer than a token can be (%d bytes at most)", file, cluster.MaxTokenBytes)
	}
	line, rest, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if strings.TrimSpace(rest) != "" {
		return "", usageErr("--nats-token-file %s: the file holds more than one line; it holds the token alone", file)
	}
	if err := cluster.CheckToken(line); err != nil {
		return "", usageErr("--nats-token-file %s: %v", file, err)
	}
	return line, nil
}

// serveHere makes sure this host serves pid in the replicated mode: it takes the
// process over when its lease is free, and names the host that serves it otherwise.
func serveHere(ctx context.Context, sys *system, pid string) error {
	node := sys.Cluster()
	if node == nil || node.Holds(pid) {
		return nil
	}
	if err := node.Takeover(ctx, pid); err != nil {
		where := "another host"
		if ps, perr := sys.Placements(ctx); perr == nil {
			for _, p := range ps {
				if p.PID == pid {
					where = "host " + p.Host
				}
			}
		}
		return usageErr("--pid %s is served by %s: %v", pid, where, err)
	}
	return nil
}
