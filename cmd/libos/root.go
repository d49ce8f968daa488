package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	los "github.com/agentlibos/libos"
	"github.com/agentlibos/libos/cmd/libos/internal/initgc"
)

// env is what every command shares: the standard streams, the global flags and the
// logger built from them.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	dataDir   string
	cacheDir  string
	logFormat string
	logLevel  string

	log *slog.Logger

	// cluster, set by serve --cluster, opens the System in the replicated mode.
	cluster *los.ClusterOptions
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "libos",
		Short: "Agent libOS: a library operating system for LLM agents",
		Long: `Agent libOS runs agent processes: a model drives a process only through tool calls,
which the libOS normalises, checks, runs and records durably. Models can write new tools
in TypeScript that run inside QuickJS compiled to WebAssembly.

Start with 'libos demo' for a guided tour, 'libos serve' to connect an MCP client,
and 'libos validate' to check tool candidates in CI.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if _, own := cmd.Annotations[ownGCTarget]; !own {
				useGC(defaultGCPercent)
			}
			return e.setupLog()
		},
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr("%v\nRun '%s --help' for usage.", err, cmd.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.StringVar(&e.dataDir, "data", "", "store directory (default $LIBOS_DATA, else $XDG_DATA_HOME/libos, else ~/.local/share/libos)")
	pf.StringVar(&e.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&e.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	pf.StringVar(&e.cacheDir, "cache-dir", "", "compilation cache of the sandbox guest (default libos/wazero in the user's cache directory; see 'libos cache warm')")
	_ = root.MarkPersistentFlagDirname("data")
	_ = root.MarkPersistentFlagDirname("cache-dir")

	root.AddGroup(
		&cobra.Group{ID: "main", Title: "Main commands:"},
		&cobra.Group{ID: "inspect", Title: "Inspecting a store:"},
		&cobra.Group{ID: "operator", Title: "Operator commands:"},
	)
	for _, c := range []*cobra.Command{newServeCmd(e), newValidateCmd(e), newTestCmd(e), newDiagnoseCmd(e), newAgentCmd(e), newDemoCmd(e), newVersionCmd(e), newCacheCmd(e)} {
		c.GroupID = "main"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newCallCmd(e), newToolsCmd(e), newSyscallsCmd(e), newPsCmd(e), newEventsCmd(e), newCandidatesCmd(e), newTapeCmd(e), newReplayCmd(e)} {
		c.GroupID = "inspect"
		root.AddCommand(c)
	}
	for _, c := range append(operatorCmds(e), newTokenCmd(e)) {
		c.GroupID = "operator"
		root.AddCommand(c)
	}
	return root
}

// The garbage collector is off from package initialisation until a command runs
// (package initgc: the heap the libraries' initialisation builds is all live when main
// starts, so collecting it only costs a short command time). Before a command runs,
// root's PersistentPreRunE gives the collector the runtime's default target, except
// for the commands annotated with ownGCTarget, which choose their own (validate and
// test, see validateGCPercent). Help, --version and a usage error never reach it and
// exit without a collection.
const (
	defaultGCPercent = 100 // the runtime's default, GOGC unset
	ownGCTarget      = "libos.gc-target"
)

// useGC makes want the collector's target, unless GOGC in the environment names one:
// an explicit GOGC always wins. It returns the function that puts back the target it
// replaced, for the tests that run several commands in one process.
func useGC(want int) (restore func()) {
	prev := debug.SetGCPercent(initgc.Target(want))
	return func() { debug.SetGCPercent(prev) }
}

func (e *env) setupLog() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(e.logLevel)); err != nil {
		return usageErr("--log-level %q: want debug, info, warn or error", e.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch e.logFormat {
	case "text":
		e.log = slog.New(slog.NewTextHandler(e.stderr, opts))
	case "json":
		e.log = slog.New(slog.NewJSONHandler(e.stderr, opts))
	default:
		return usageErr("--log-format %q: want text or json", e.logFormat)
	}
	return nil
}

// versionString names this build: the module version, the sandbox guest it embeds
// (its sha256 and QuickJS release), wazero, Go and the platform, all from the build
// itself (Version in package libos), so none of it can drift.
func versionString() string {
	v := los.Version()
	var b strings.Builder
	fmt.Fprintf(&b, "libos %s\n", v.Module)
	if v.Revision != "" {
		fmt.Fprintf(&b, "revision %s\n", v.Revision)
	}
	fmt.Fprintf(&b, "guest sha256 %s\n", v.Guest.SHA256)
	fmt.Fprintf(&b, "QuickJS %s (compiled to WebAssembly; sources %s, patch sha256 %s)\n", v.Guest.QuickJSRelease, v.Guest.QuickJSSource, v.Guest.PatchSHA256)
	fmt.Fprintf(&b, "built with %s, wasi-libc %s\n", v.Guest.Clang, v.Guest.WASILibc)
	fmt.Fprintf(&b, "wazero %s\n", v.Wazero)
	fmt.Fprintf(&b, "%s %s", v.Go, v.Platform)
	return b.String()
}

func newVersionCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version of libos, of its sandbox guest and of the toolchain",
		Long: `Print the module version, the sha256 of the embedded sandbox guest, the QuickJS
release and how the guest was built, the wazero version, the Go version and the platform.`,
		Example: "  libos version\n  libos version --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return writeJSON(e.stdout, los.Version())
			}
			fmt.Fprintln(e.stdout, versionString())
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the version information as one JSON object")
	return c
}

func newCacheCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "Manage the compilation cache of the sandbox guest",
		Long: `The sandbox guest (QuickJS in WebAssembly) is compiled to machine code once and kept in
the compilation cache (--cache-dir, default libos/wazero in the user's cache directory),
so that later commands start without compiling it. Only a command that compiles the guest
looks at the directory; when it cannot be created or written, the command warns once and
compiles in memory. Commands that run no tool (ps, events, candidates, ...) never touch it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	warm := &cobra.Command{
		Use:   "warm",
		Short: "Compile the sandbox guest into the compilation cache",
		Long: `Compile the sandbox guest into the compilation cache now, and keep there the state every
call starts from, so that the next command (libos validate in a CI job, libos serve)
starts without compiling the guest or preparing that state. A CI cache step that keeps
the directory between runs saves both on every run after the first.`,
		Example: "  libos cache warm\n  libos cache warm --cache-dir .libos-cache && libos validate --cache-dir .libos-cache tools/candidates/",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := e.cacheDirectory()
			if dir == "" {
				return usageErr("no user cache directory; pass --cache-dir DIR")
			}
			if err := los.WarmCache(cmd.Context(), dir); err != nil {
				return usageErr("%v", err)
			}
			fmt.Fprintf(e.stdout, "compiled the sandbox guest into %s\n", dir)
			return nil
		},
	}
	c.AddCommand(warm)
	return c
}
