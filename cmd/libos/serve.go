package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/mcpserver"
	"github.com/agentlibos/libos/store"
)

type serveFlags struct {
	image      string
	projection string
	http       string
	pid        string
	fresh      bool

	// Authorization and TLS of --http (serve_auth.go).
	authTokens    string
	oauthIssuer   string
	oauthAudience string
	oauthJWKS     string
	tlsCert       string
	tlsKey        string
	insecure      bool

	// The replicated mode (serve_cluster.go).
	cluster clusterFlags
}

func newServeCmd(e *env) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve a process over the Model Context Protocol (stdio or streamable HTTP)",
		Long: `serve serves one process of the store over the Model Context Protocol: stdio by
default, streamable HTTP with --http.

Which process: with --pid, that one. Otherwise, when the store holds exactly one live
process spawned from the image (the embedded one, or --image; same digest, projection
included), serve serves it again, rehydrated: its registered JIT tools, capabilities,
active Skills and event log carry on, so a client that restarts the server finds its
tools where it left them. When the store holds none, serve spawns one. When it holds
several, serve names them and stops: choose one with --pid, or pass --new. --new always
spawns a fresh process.

tools/list is the process's projection (direct: every tool, JIT tools included;
multiplexed: the process tools plus run_jit_tool). tools/call goes through the libOS's
tool-call adapter and pipeline; results carry structuredContent and text content, tool
errors are isError results with a typed code, malformed frames are JSON-RPC errors.
Registering a JIT tool sends notifications/tools/list_changed.

Over HTTP, serve binds 127.0.0.1 or another loopback address without authentication,
like stdio. Any other address needs authentication and TLS, or --insecure:
  --auth-tokens FILE      bearer tokens, one a line: ID sha256:HEX SCOPE... (the hash,
                          never the token; make one with 'libos token new'); read
                          again when it changes (within a second) and on SIGHUP, so
                          a line removed revokes its token without a restart
  --oauth-issuer URL      accept JWT access tokens of this OAuth authorization server
  --oauth-audience URI    the canonical URI of this server (https://host/mcp), which
                          tokens must name as their audience (RFC 8707)
  --oauth-jwks-url URL    the issuer's keys (default: from the issuer's metadata)
  --tls-cert, --tls-key   serve HTTPS with this certificate and key (PEM)
Scopes: libos:process:PID or libos:process:* (which processes), libos:operator
(operator rights). A token without a scope covering the served process gets 403; no
token, or one that does not verify, 401 with the RFC 9728 metadata of the resource
(/.well-known/oauth-protected-resource).

With --cluster (CLUSTER.md), the embedded NATS server likewise binds loopback addresses
without more; an address beyond loopback (--nats-listen, --cluster-listen) needs the hosts'
shared token (--nats-token-file, the same file on every host), or --cluster-insecure.

SIGINT or SIGTERM stops serve gracefully: calls in flight finish and are recorded before
the store closes. The PID is logged on stderr; stdout belongs to the protocol.`,
		Example: `  # stdio, for an MCP client that starts the server itself
  libos serve

  # a client configuration (Claude Desktop, VS Code, ...):
  #   {"mcpServers": {"libos": {"command": "libos", "args": ["serve"]}}}

  # streamable HTTP on localhost, multiplexed projection, a separate store
  libos serve --http 127.0.0.1:8765 --projection multiplexed --data ./agent-store

  # HTTPS beyond loopback, with bearer tokens from a file
  libos token new --id ci --scope 'libos:process:*' --file tokens.txt > ci.token
  libos serve --http 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem --auth-tokens tokens.txt

  # an OAuth 2.1 resource server of an authorization server
  libos serve --http 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem \
    --oauth-issuer https://auth.example.com --oauth-audience https://mcp.example.com/mcp

  # serve a given process of the store, or always a fresh one
  libos serve --pid pid_0123...
  libos serve --new`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), e, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.image, "image", "", "image manifest (YAML or JSON) to spawn the process from (default: the embedded image; see 'libos images')")
	fl.StringVar(&f.projection, "projection", "", "how tools are shown to the model: direct or multiplexed (default: the image's)")
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on ADDR (host:port) instead of stdio")
	fl.StringVar(&f.pid, "pid", "", "serve this process of the store")
	fl.BoolVar(&f.fresh, "new", false, "spawn a new process even when the store holds one of this image")
	_ = c.RegisterFlagCompletionFunc("projection", cobra.FixedCompletions([]string{"direct", "multiplexed"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("image", "json", "yaml", "yml")
	c.MarkFlagsMutuallyExclusive("pid", "image")
	c.MarkFlagsMutuallyExclusive("pid", "projection")
	c.MarkFlagsMutuallyExclusive("pid", "new")
	authFlags(c, &f)
	addClusterFlags(c, &f.cluster)
	return c
}

func serve(ctx context.Context, e *env, f serveFlags) error {
	proj, err := parseProjection(f.projection)
	if err != nil {
		return err
	}
	// The HTTP security is checked before the store is touched too: a server that
	// would refuse to start changes nothing.
	sec, err := httpSecurity(e, f)
	if err != nil {
		return err
	}
	// The image is checked before the store is touched: a bad manifest changes nothing.
	var img *image.Image
	if f.pid == "" {
		if img, err = loadImage(f.image, proj); err != nil {
			return err
		}
	}
	if e.cluster, err = f.cluster.options(e); err != nil {
		return err
	}
	sys, err := e.open(ctx, readWrite)
	if err != nil {
		return err
	}
	defer func() {
		if err := sys.Close(); err != nil {
			e.log.Error("serve: close", "err", err)
		}
	}()
	// Corruption found while serving (by a read, or by a background compaction that
	// would otherwise retry forever) stops the server as a signal does, answering the
	// calls in flight, and serve exits 2 with the advice.
	ctx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	go func() {
		select {
		case <-sys.Store().Corrupted():
			err := corruptErr(sys.Store().Corruption())
			e.log.Error("serve: the store is corrupt; stopping", "err", err)
			stopServing(err)
		case <-ctx.Done():
		}
	}()
	if err := serveProcess(ctx, e, f, sys, img, proj, sec); err != nil {
		return err
	}
	if cause := context.Cause(ctx); store.IsCorrupt(cause) {
		return cause
	}
	return nil
}

// serveProcess serves the process f names (or the store's process of img, or a new
// one) until the client leaves or ctx ends.
func serveProcess(ctx context.Context, e *env, f serveFlags, sys *system, img *image.Image, proj engine.Projection, sec *httpSec) error {
	var err error

	pid := f.pid
	if pid == "" && !f.fresh {
		if pid, err = processOf(sys.k, img); err != nil {
			return err
		}
		if pid != "" {
			info, _ := sys.k.Process(pid)
			proj = info.Projection
			e.log.Info("serving the store's process of this image again", "pid", pid, "projection", proj, "state", info.State, "store", sys.dir)
			if info.State == engine.StatePaused {
				e.log.Warn("the process is paused: every call is refused until it is resumed", "pid", pid)
			}
		}
	}
	if pid == "" {
		pid, err = sys.spawnImage(ctx, f.image, proj)
		if err != nil {
			return err
		}
		info, _ := sys.k.Process(pid)
		proj = info.Projection
		e.log.Info("spawned a process", "pid", pid, "projection", proj, "store", sys.dir)
	} else if f.pid != "" {
		if err := serveHere(ctx, sys, pid); err != nil {
			return err
		}
		info, err := sys.k.Process(pid)
		if err != nil {
			return usageErr("--pid %s: %v (list processes with 'libos ps')", pid, err)
		}
		proj = info.Projection
		e.log.Info("serving an existing process", "pid", pid, "projection", proj, "store", sys.dir)
	}

	bridge, err := sys.MCPServer(pid, mcpserver.Options{Logger: e.log, Auth: sec.auth})
	if err != nil {
		return usageErr("serve: %v", err)
	}
	defer bridge.Close()
	stopOperator := serveOperator(ctx, e, sys.System, sys.dir)
	defer stopOperator()

	if f.http != "" {
		return serveHTTP(ctx, e, sys, bridge, f.http, sec)
	}
	return serveStdio(ctx, e, sys, bridge)
}

// processOf is the one live process of the store spawned from img, "" when there is
// none, and a usage error naming them when there are several. A process matches when
// it was spawned (not forked) from an image with img's digest as a spawn records it:
// the same manifest, Skills and limits, and the same projection.
func processOf(k *engine.Kernel, img *image.Image) (string, error) {
	want := *img
	if want.Projection == "" {
		want.Projection = engine.Direct // what a spawn records for an image without one
	}
	digest := want.Digest()
	procs, err := k.ListProcesses()
	if err != nil {
		return "", usageErr("serve: %v", err)
	}
	var found []string
	for _, p := range procs {
		if p.State != engine.StateKilled && p.Parent == "" && p.ImageDigest == digest {
			found = append(found, p.PID)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", usageErr("serve: the store holds %d live processes of image %s %s (%s): serve one with --pid PID, or spawn another with --new (list them with 'libos ps')",
		len(found), img.Name, img.Version, strings.Join(found, ", "))
}

// serveStdio runs the protocol on stdin/stdout until the client closes stdin or a
// signal arrives. On a signal, the kernel stops taking calls and waits for the calls in
// flight to settle, and the session ends once every request read has been answered:
// the answers of the calls that ran reach the client before serve exits. A line that
// is not one exact JSON-RPC message is answered with an error and the session goes on.
func serveStdio(ctx context.Context, e *env, sys *system, bridge *mcpserver.Server) error {
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			e.log.Info("stopping: waiting for calls in flight")
			_ = sys.k.Close()
		case <-stopped:
		}
	}()
	if err := bridge.Stdio(ctx, e.stdin, e.stdout); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("serve: %w", err)}
	}
	e.log.Info("stopped")
	return nil
}

// serveHTTP serves streamable HTTP on addr until a signal arrives, then stops
// accepting connections, lets calls in flight settle and closes.
func serveHTTP(ctx context.Context, e *env, sys *system, bridge *mcpserver.Server, addr string, sec *httpSec) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErr("--http %s: %v", addr, err)
	}
	scheme := "http"
	if sec.tls != nil {
		scheme = "https"
	}
	srv := bridge.MCP()
	handler := bridge.Handler(&mcp.StreamableHTTPOptions{Logger: e.log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	mux.Handle("/", handler)
	// The RFC 9728 metadata is public: clients read it to learn where tokens come from.
	mux.Handle(mcpserver.ResourceMetadataPath, bridge.MetadataHandler())
	mux.Handle(mcpserver.ResourceMetadataPath+"/", bridge.MetadataHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// The address line is the one stable line a script may wait for.
	e.log.Info("serving MCP over streamable HTTP", "url", scheme+"://"+ln.Addr().String()+"/mcp", "auth", sec.describe())
	fmt.Fprintf(e.stderr, "libos: listening on %s://%s/mcp\n", scheme, ln.Addr())
	if sec.tokenFile != "" {
		// SIGHUP reads the token file now (it is also read again by itself when it
		// changes): a revoked token stops working, a new one starts.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-hup:
					e.log.Info("SIGHUP: reading the token file again", "file", sec.tokenFile)
					_ = sec.auth.ReloadTokens()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	errc := make(chan error, 1)
	go func() {
		if sec.tls != nil {
			// ServeTLS, not a TLS listener: it also sets up HTTP/2.
			hs.TLSConfig = sec.tls
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err := <-errc:
		return &exitError{code: exitUsage, err: fmt.Errorf("serve: %w", err)}
	case <-ctx.Done():
	}
	e.log.Info("stopping: waiting for calls in flight")
	// The access decisions counted and not recorded yet go to the log while the
	// kernel takes them.
	bridge.FlushAccess(context.WithoutCancel(ctx))
	_ = sys.k.Close()
	// The calls are settled; their answers are being written. Wait for every POST in
	// flight to be answered, then end the sessions, whose event streams (GET /mcp)
	// never end by themselves. The bound only guards against a client that stops
	// reading its answer.
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelWait()
	if err := bridge.Wait(waitCtx); err != nil {
		e.log.Warn("stopping: a client is not reading its answer", "err", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		_ = hs.Close()
	}
	e.log.Info("stopped")
	return nil
}
