package libos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/mcpserver"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// Options configures a System. The zero value is ready to use: no compilation cache on
// disk, the sandbox's and the kernel's default limits, the built-in tools only.
type Options struct {
	// CacheDir holds wazero's compilation cache of the sandbox guest and the snapshot of
	// its prepared state, so that a new process starts without compiling the guest or
	// preparing that state again (DefaultCacheDir is the one the libos command uses).
	// Empty compiles in memory and writes nothing outside the store's directory. The
	// directory is created if missing, proved writable and opened by the guest's compile
	// only: in Open, or with LazySandbox at the first JIT tool call; a System that
	// compiles nothing leaves it untouched. A directory that cannot be used fails that
	// compile with an error matching ErrCache, unless OnCacheUnusable is set.
	CacheDir string
	// OnCacheUnusable, when set, makes a CacheDir that cannot be used no failure: the
	// guest is compiled in memory and OnCacheUnusable is called once, from the compile,
	// with the error (matching ErrCache) that would otherwise have failed it
	// (wasm.Config.OnCacheUnusable). A program that cannot do without a cache does not
	// set it; one that only wants to say so, as the libos command does, prints it.
	OnCacheUnusable func(error)
	// MaxMemory is the hard cap, in bytes, of the sandbox's linear memory per call; 0
	// means the sandbox's default (wasm.DefaultMaxMemory).
	MaxMemory int64
	// PoolSize is how many idle sandbox instances are kept; 0 means DefaultPoolSize or
	// GOMAXPROCS, whichever is larger; a negative value keeps none.
	PoolSize int
	// Limits are the kernel-wide limits; processes can only tighten them. Zero fields
	// default.
	Limits engine.Limits
	// ApprovalTimeout bounds how long an operator-class tool call waits for a decision;
	// 0 means engine.DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Tools are built-in tools of the embedder, offered besides the libOS's own (echo,
	// the Skill tool and the JIT tool lifecycle); a process enables them by name.
	Tools []engine.Tool
	// SkipJITRestore restores the store's processes without installing their
	// registered JIT tools again, so that Open itself writes nothing (installing a tool
	// again is recorded in the process's event log): for programs that only read, such
	// as a process list or an event log printer. The JIT tools of restored processes
	// are then absent from their tool tables; registering a tool and forking a
	// checkpoint that holds JIT tools work as usual (engine.Config.SkipJITRestore).
	// The zero value restores everything.
	SkipJITRestore bool
	// LazySandbox leaves the sandbox guest uncompiled until the first JIT tool call
	// needs it (wasm.Config.Lazy), which then reports a failure to compile it: for
	// programs that may never run one, such as a process list or an event log printer
	// (with SkipJITRestore), which then skip the cache read (the longest part of Open)
	// or, with an empty cache, the compile. The zero value compiles in Open, which
	// fails if the guest cannot be compiled.
	LazySandbox bool
	// Cluster, when set, runs the System in the replicated mode (ClusterOptions); nil
	// keeps the single-host store.
	Cluster *ClusterOptions
	// ReadOnly opens the store to read it only (store.Options.ReadOnly): Open writes
	// nothing into dir, neither a record nor one of Pebble's files, and does not create
	// it (a missing or empty dir is an empty store). What a writable Open records, it
	// only reports: the calls left unsettled (UnknownSettlements), the approvals past
	// their deadline (shown expired) and the JIT tools installed again (engine.Open).
	// Every method that writes fails with an error matching ErrReadOnly. It works on a
	// store on a read-only file system or a backup, beside other read-only Systems; a
	// writable System holding the store makes it fail with ErrStoreInUse, and the other
	// way round. It does not combine with Cluster. The zero value reads and writes.
	ReadOnly bool

	// storeClock, when set, is the store's clock (store.Options.Now). It is called once
	// at the start of every write transaction, on the writer's goroutine: the tests of
	// the call path read the stack of each write through it.
	storeClock func() time.Time
}

// CodeCacheUnusable is the code of ErrCache.
const CodeCacheUnusable = liberr.CodeCacheUnusable

// ErrCache is matched (errors.Is) by the error of the sandbox guest's compile when
// Options.CacheDir cannot hold the compilation cache (code cache_unusable): the error
// of Open, NewValidator or WarmCache, or with LazySandbox of the first JIT tool call.
// With Options.OnCacheUnusable the compile goes on in memory and the callback is given
// the error instead; opening again with an empty CacheDir compiles in memory too.
var ErrCache = liberr.New("libos", CodeCacheUnusable, "the compilation cache directory is unusable")

// ErrStoreInUse is matched (errors.Is) by the error of Open when another program holds
// the store: a store admits one System at a time.
var ErrStoreInUse = store.ErrInUse

// ErrReadOnly is matched (errors.Is) by the error of every write on a System opened
// with Options.ReadOnly (code read_only); nothing was written.
var ErrReadOnly = store.ErrReadOnly

// DefaultCacheDir is the compilation cache the libos command uses: libos/wazero in the
// user's cache directory ($XDG_CACHE_HOME, ~/.cache, %LocalAppData%, ~/Library/Caches).
func DefaultCacheDir() (string, error) {
	dir, err := wasm.DefaultCacheDir()
	if err != nil {
		return "", fmt.Errorf("libos: no user cache directory: %w", err)
	}
	return dir, nil
}

// DefaultDir is the store directory the libos command uses: $LIBOS_DATA, else
// $XDG_DATA_HOME/libos, else ~/.local/share/libos.
func DefaultDir() (string, error) { return store.DefaultDir() }

// System is the libOS on one store: the durable store, the sandbox (QuickJS in wazero,
// with its compilation cache), the JIT tool lifecycle and the kernel, wired together.
// Every method of the kernel is a method of System: Spawn and SpawnImage, Kill, Pause,
// Resume, Checkpoint and Fork, ListProcesses and Process (ps), HandleFrame (a model's
// tool call in any provider's frame), Runtime (the host tool API), Tools (the
// projection), Grant and Revoke, Approvals, Approve and Deny, Events and VerifyLog, and
// the host's cleanup: Bindings, RevokeBinding and DiscardCandidate (the operator API). A System is safe for concurrent use. Close it once; the kernel's own
// Close is shadowed by System.Close, which closes everything in order.
type System struct {
	*engine.Kernel

	dir     string
	st      *store.Store
	sandbox *wasm.Engine
	jit     *tools.JIT
	// cluster is the replicated mode's node and server, nil on one host.
	cluster *clusterHost
}

// DefaultPoolSize is how many idle sandbox instances a System keeps by default. A JIT
// call holds an instance while it runs, and one that finds the pool empty instantiates
// the guest and closes the instance afterwards, which costs more than the call itself:
// with the pool at GOMAXPROCS (2 here), 16 concurrent calls spent about 1.2 ms of CPU
// each, with 16 idle instances about 0.75 ms (BenchmarkJITCallConcurrent in package
// tools, which uses the same pool size). An idle instance keeps its guest memory
// (restored to the prepared snapshot; one that grew past the engine's threshold is
// closed instead), and instances are made only when calls overlap: an idle server
// holds none beyond what its peak concurrency left.
const DefaultPoolSize = 16

// Open opens the store in dir (created if missing, unless Options.ReadOnly) and
// starts the libOS on it. The kernel restores every process the store holds, with the
// JIT tools they registered (recorded as tools_changed events with change
// "rehydrated"); a registered tool that can no longer be installed is left out and
// named by RehydrateErr, and the rest of the system works. Calls in flight when a
// previous System stopped are reported by UnknownSettlements, never retried.
func Open(ctx context.Context, dir string, opts Options) (*System, error) {
	if opts.ReadOnly && opts.Cluster != nil {
		return nil, liberr.New("libos", liberr.CodeInvalidConfig, "open %s: a read-only System cannot run in the replicated mode", dir)
	}
	pool := opts.PoolSize
	if pool == 0 {
		pool = max(DefaultPoolSize, runtime.GOMAXPROCS(0))
	}
	sb, err := newSandbox(ctx, wasm.Config{CacheDir: opts.CacheDir, OnCacheUnusable: opts.OnCacheUnusable, MaxMemory: opts.MaxMemory, PoolSize: pool, Lazy: opts.LazySandbox})
	if err != nil {
		return nil, err
	}
	var ch *clusterHost
	if opts.Cluster != nil {
		if ch, err = startCluster(ctx, dir, opts.Cluster); err != nil {
			sb.Close(ctx)
			return nil, err
		}
	}
	so := ch.storeOptions()
	so.Now = opts.storeClock
	so.ReadOnly = opts.ReadOnly
	st, err := store.Open(dir, so)
	if err != nil {
		ch.close()
		sb.Close(ctx)
		return nil, fmt.Errorf("libos: open the store %s: %w", dir, err)
	}
	if ch != nil {
		ch.st = st
	}
	jit, err := tools.NewJIT(tools.Config{Store: st, Sandbox: sb})
	if err != nil {
		ch.close()
		st.Close()
		sb.Close(ctx)
		return nil, fmt.Errorf("libos: JIT tools: %w", err)
	}
	builtins := append([]engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}, jit.Tools()...)
	builtins = append(builtins, opts.Tools...)
	// The kernel rebuilds the committed JIT bindings of the processes it restores and
	// of the processes it forks from checkpoints, through the lifecycle: one wiring.
	cfg := engine.Config{
		Builtins:        builtins,
		Limits:          opts.Limits,
		ApprovalTimeout: opts.ApprovalTimeout,
		JIT:             jit,
		SkipJITRestore:  opts.SkipJITRestore,
	}
	if ch != nil {
		// A host serves the processes whose leases it holds: none yet.
		cfg.Restore = func(string) bool { return false }
	}
	k, err := engine.Open(ctx, st, cfg)
	if err != nil {
		ch.close()
		st.Close()
		sb.Close(ctx)
		return nil, fmt.Errorf("libos: start the kernel on %s: %w", dir, err)
	}
	s := &System{Kernel: k, dir: dir, st: st, sandbox: sb, jit: jit, cluster: ch}
	if ch != nil {
		ch.node.Start(st, k)
	}
	return s, nil
}

// newSandbox starts the sandbox. Its compile, not this, looks at the cache directory
// (wasm.Config.CacheDir): a lazy sandbox that never compiles never touches it, and a
// prestarted one (wasm.Prestart) has looked already. A directory that cannot be used
// is an error of code cache_unusable, which matches ErrCache.
func newSandbox(ctx context.Context, cfg wasm.Config) (*wasm.Engine, error) {
	sb, err := wasm.NewEngine(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("libos: start the sandbox: %w", err)
	}
	return sb, nil
}

// Store is the durable store the System owns, for components that keep their own
// records in a process's event log beside the kernel's (the agent loop's Log). It is
// closed by Close. Processes, tools and calls go through the kernel (the methods of
// System), never through the store directly.
func (s *System) Store() *store.Store { return s.st }

// SandboxPrestarted reports whether the System's sandbox is the one wasm.Prestart
// started (package wasm), which the libos command does while it initialises.
func (s *System) SandboxPrestarted() bool { return s.sandbox != nil && s.sandbox.Prestarted() }

// Dir is the store's directory.
func (s *System) Dir() string { return s.dir }

// RehydrateErr names the registered JIT tools of restored processes that could not be
// installed again (their source no longer passes the checks, their name is now a
// built-in), nil when every one was. BindingFailures has the same as data.
func (s *System) RehydrateErr() error {
	var errs []error
	for _, f := range s.BindingFailures() {
		errs = append(errs, fmt.Errorf("libos: rehydrate %s in %s: %w", f.Name, f.PID, f.Err))
	}
	return errors.Join(errs...)
}

// Close stops the kernel (waiting for the calls in flight to settle), then closes the
// store and the sandbox. Only the first call does anything.
func (s *System) Close() error {
	if s.sandbox == nil {
		return nil
	}
	kerr := s.Kernel.Close()
	cerr := s.cluster.close()
	serr := s.st.Close()
	s.sandbox.Close(context.Background())
	s.sandbox = nil
	if err := errors.Join(kerr, cerr, serr); err != nil {
		return fmt.Errorf("libos: close %s: %w", s.dir, err)
	}
	return nil
}

// DiscardCandidate is the operator's cleanup of a JIT tool candidate of process pid
// that was never registered: it becomes discarded, with a jit_discarded event (by
// "operator", with reason) in pid's log, and validate_jit_tool and register_jit_tool
// refuse it from then on with code candidate_discarded (tools.ErrCandidateDiscarded).
// A registered candidate is refused: RevokeBinding removes its tool. The other host
// cleanups are the kernel's: Bindings and RevokeBinding, Pause, Resume, Kill,
// Checkpoint and Fork.
func (s *System) DiscardCandidate(ctx context.Context, pid, id, reason string) error {
	return s.jit.Discard(ctx, pid, id, "operator", reason)
}

// DefaultImage is the image the libos command spawns: echo, the Skill tool and the JIT
// tool lifecycle, the capabilities clock:now, kv:read, kv:write and tools:call, and the
// libOS's own Skills.
func DefaultImage() (*image.Image, error) { return tools.DefaultImage() }

// RenderTools renders the tool definitions process pid's model sees (its projection)
// for provider p: MCP Tool objects, OpenAI function definitions or Anthropic tools.
func (s *System) RenderTools(pid string, p render.Provider) (json.RawMessage, error) {
	defs, err := s.Tools(pid)
	if err != nil {
		return nil, err
	}
	return render.Tools(defs, p)
}

// MCPServer is an MCP server for process pid, to run on a transport (Server.Stdio
// for stdio, Server.Wrap for any transport of the MCP Go SDK) or to mount as a
// streamable HTTP handler (Server.Handler). Empty opts.Instructions become the
// process's instructions (its Skill catalog). Close the server when done with it.
func (s *System) MCPServer(pid string, opts mcpserver.Options) (*mcpserver.Server, error) {
	if _, err := s.Process(pid); err != nil {
		return nil, err
	}
	if opts.Instructions == "" {
		instr, err := s.Instructions(pid)
		if err != nil {
			return nil, err
		}
		opts.Instructions = instr
	}
	if opts.Name == "" {
		opts.Name = "libos"
	}
	if opts.Version == "" {
		opts.Version = Version().Module
	}
	return mcpserver.New(s.Kernel, pid, opts)
}

// ServeMCP serves process pid over MCP on transport t until the client disconnects or
// ctx ends: mcp.StdioTransport, mcp.IOTransport, an in-memory transport, or any other
// of the MCP Go SDK. Every tools/call goes to the kernel as a frame, as from any model.
//
// The SDK's line transports (mcp.StdioTransport, mcp.IOTransport) end the session on
// one line that does not decode; ServeMCP reads their streams with the libOS's own
// line reader instead, which answers such a line with a protocol_frame error and goes
// on (the same one `libos serve` uses). Other transports deliver decoded messages and
// are checked by Wrap.
func (s *System) ServeMCP(ctx context.Context, pid string, t mcp.Transport, opts mcpserver.Options) error {
	srv, err := s.MCPServer(pid, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	switch lt := t.(type) {
	case *mcp.StdioTransport:
		return srv.Stdio(ctx, os.Stdin, os.Stdout)
	case *mcp.IOTransport:
		defer lt.Writer.Close()
		defer lt.Reader.Close()
		return srv.Stdio(ctx, lt.Reader, lt.Writer)
	}
	err = srv.MCP().Run(ctx, srv.Wrap(t))
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}
