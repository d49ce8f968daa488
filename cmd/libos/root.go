package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the libOS version, set at link time for releases
// (-ldflags "-X main.version=v1.2.3").
var version = "0.0.0-dev"

// quickJSVersion is the QuickJS release compiled into the sandbox guest
// (wasm/guest/build.sh, CONFIG_VERSION).
const quickJSVersion = "2021-03-27"

// env is what every command shares: the standard streams, the global flags and the
// logger built from them.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	dataDir   string
	logFormat string
	logLevel  string

	log *slog.Logger
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
	_ = root.MarkPersistentFlagDirname("data")

	root.AddGroup(
		&cobra.Group{ID: "main", Title: "Main commands:"},
		&cobra.Group{ID: "inspect", Title: "Inspecting a store:"},
		&cobra.Group{ID: "operator", Title: "Operator commands:"},
	)
	for _, c := range []*cobra.Command{newServeCmd(e), newValidateCmd(e), newTestCmd(e), newDiagnoseCmd(e), newAgentCmd(e), newDemoCmd(e)} {
		c.GroupID = "main"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newCallCmd(e), newToolsCmd(e), newSyscallsCmd(e), newPsCmd(e), newEventsCmd(e), newCandidatesCmd(e), newTapeCmd(e), newReplayCmd(e)} {
		c.GroupID = "inspect"
		root.AddCommand(c)
	}
	for _, c := range operatorCmds(e) {
		c.GroupID = "operator"
		root.AddCommand(c)
	}
	return root
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

// versionString names this build and the two engines it embeds; wazero's version is
// read from the build information, so it cannot drift from go.mod.
func versionString() string {
	wazero := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				wazero = d.Version
				if d.Replace != nil {
					wazero = d.Replace.Version
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "libos %s\n", version)
	fmt.Fprintf(&b, "QuickJS %s (compiled to WebAssembly)\n", quickJSVersion)
	fmt.Fprintf(&b, "wazero %s\n", wazero)
	fmt.Fprintf(&b, "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
