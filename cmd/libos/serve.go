package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/cmd/libos/internal/mcpserve"
)

type serveFlags struct {
	image      string
	projection string
	http       string
	pid        string
}

func newServeCmd(e *env) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve a process over the Model Context Protocol (stdio or streamable HTTP)",
		Long: `serve spawns a process (or, with --pid, serves one the store already holds) and serves
it over the Model Context Protocol: stdio by default, streamable HTTP with --http.

tools/list is the process's projection (direct: every tool, JIT tools included;
multiplexed: the process tools plus run_jit_tool). tools/call goes through the libOS's
tool-call adapter and pipeline; results carry structuredContent and text content, tool
errors are isError results with a typed code, malformed frames are JSON-RPC errors.
Registering a JIT tool sends notifications/tools/list_changed.

SIGINT or SIGTERM stops serve gracefully: calls in flight finish and are recorded before
the store closes. The PID is logged on stderr; stdout belongs to the protocol.`,
		Example: `  # stdio, for an MCP client that starts the server itself
  libos serve

  # a client configuration (Claude Desktop, VS Code, ...):
  #   {"mcpServers": {"libos": {"command": "libos", "args": ["serve"]}}}

  # streamable HTTP on localhost, multiplexed projection, a separate store
  libos serve --http 127.0.0.1:8765 --projection multiplexed --data ./agent-store

  # serve again a process that an earlier serve spawned
  libos serve --pid pid_0123...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), e, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.image, "image", "", "image manifest (YAML or JSON) to spawn the process from (default: the embedded image; see 'libos images')")
	fl.StringVar(&f.projection, "projection", "", "how tools are shown to the model: direct or multiplexed (default: the image's)")
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on ADDR (host:port) instead of stdio")
	fl.StringVar(&f.pid, "pid", "", "serve this existing process instead of spawning one")
	_ = c.RegisterFlagCompletionFunc("projection", cobra.FixedCompletions([]string{"direct", "multiplexed"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("image", "json", "yaml", "yml")
	c.MarkFlagsMutuallyExclusive("pid", "image")
	c.MarkFlagsMutuallyExclusive("pid", "projection")
	return c
}

func serve(ctx context.Context, e *env, f serveFlags) error {
	proj, err := parseProjection(f.projection)
	if err != nil {
		return err
	}
	// The image is checked before the store is touched: a bad manifest changes nothing.
	if f.pid == "" {
		if _, err := loadImage(f.image, proj); err != nil {
			return err
		}
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

	pid := f.pid
	if pid == "" {
		pid, err = sys.spawnImage(ctx, f.image, proj)
		if err != nil {
			return err
		}
		info, _ := sys.k.Process(pid)
		proj = info.Projection
		e.log.Info("spawned a process", "pid", pid, "projection", proj, "store", sys.dir)
	} else {
		info, err := sys.k.Process(pid)
		if err != nil {
			return usageErr("--pid %s: %v (list processes with 'libos ps')", pid, err)
		}
		proj = info.Projection
		e.log.Info("serving an existing process", "pid", pid, "projection", proj, "store", sys.dir)
	}

	instr, err := sys.k.Instructions(pid)
	if err != nil {
		return usageErr("serve: %v", err)
	}
	bridge, err := mcpserve.New(sys.k, pid, mcpserve.Options{
		Name:         "libos",
		Version:      version,
		Instructions: instr,
		Logger:       e.log,
	})
	if err != nil {
		return usageErr("serve: %v", err)
	}
	defer bridge.Close()
	stopOperator := serveOperator(ctx, e, sys.k, sys.dir)
	defer stopOperator()

	if f.http != "" {
		return serveHTTP(ctx, e, sys, bridge, f.http)
	}
	return serveStdio(ctx, e, sys, bridge)
}

// serveStdio runs the protocol on stdin/stdout until the client closes stdin or a
// signal arrives. On a signal, the kernel stops taking calls and waits for the calls in
// flight to settle while the connection is still open, so their answers reach the
// client; then the connection closes.
func serveStdio(ctx context.Context, e *env, sys *system, bridge *mcpserve.Server) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			e.log.Info("stopping: waiting for calls in flight")
			_ = sys.k.Close()
			cancel()
		case <-runCtx.Done():
		}
	}()
	err := bridge.MCP().Run(runCtx, bridge.Transport(e.stdin, e.stdout))
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return &exitError{code: exitUsage, err: fmt.Errorf("serve: %w", err)}
	}
	e.log.Info("stopped")
	return nil
}

// serveHTTP serves streamable HTTP on addr until a signal arrives, then stops
// accepting connections, lets calls in flight settle and closes.
func serveHTTP(ctx context.Context, e *env, sys *system, bridge *mcpserve.Server, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErr("--http %s: %v", addr, err)
	}
	srv := bridge.MCP()
	handler := bridge.Handler(&mcp.StreamableHTTPOptions{Logger: e.log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	mux.Handle("/", handler)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// The address line is the one stable line a script may wait for.
	e.log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	fmt.Fprintf(e.stderr, "libos: listening on http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return &exitError{code: exitUsage, err: fmt.Errorf("serve: %w", err)}
	case <-ctx.Done():
	}
	e.log.Info("stopping: waiting for calls in flight")
	_ = sys.k.Close()
	// Answers of the settled calls are still being written: give them a moment, then
	// end the sessions, whose event streams (GET /mcp) never end by themselves.
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
