package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/cluster"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/mcpserver"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// withSystem opens the store for the length of fn.
func withSystem(ctx context.Context, e *env, mode access, fn func(*system) error) (err error) {
	sys, err := e.open(ctx, mode)
	if err != nil {
		return err
	}
	return runClosing(sys, fn)
}

// runClosing runs fn on sys and closes it; a failed close is the error when fn
// succeeded.
func runClosing(sys *system, fn func(*system) error) (err error) {
	defer func() {
		if cerr := sys.Close(); cerr != nil && err == nil {
			err = usageErr("%v", cerr)
		}
	}()
	return fn(sys)
}

// pidArgs completes PIDs from the store.
func pidArgs(e *env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if e.log == nil {
			_ = e.setupLog()
		}
		var pids []string
		_ = withSystem(cmd.Context(), e, readOnly, func(sys *system) error {
			procs, err := sys.ListProcesses()
			for _, p := range procs {
				if strings.HasPrefix(p.PID, toComplete) {
					pids = append(pids, p.PID)
				}
			}
			return err
		})
		return pids, cobra.ShellCompDirectiveNoFileComp
	}
}

func newCallCmd(e *env) *cobra.Command {
	var frameFile string
	var host bool
	c := &cobra.Command{
		Use:   "call PID [NAME [ARGS-JSON]]",
		Short: "Run one tool call in a process, through the full pipeline",
		Long: `call runs one tool call in process PID and prints the normalised result (canonical JSON).

By default the call takes the model's path: the frame {"name": NAME, "arguments": ARGS}
goes through the tool-call adapter and the process's projection, exactly as a tool call
from a model would. With --frame, the frame is read from a file (or - for stdin) in any
shape the adapter accepts (OpenAI, Anthropic, MCP). With --host, the call takes the host
API's path instead (runtime.tools.call): names are looked up in the process tool table,
JIT tools are reachable in both projections and run_jit_tool never is.

Every call is recorded in the process's event log. Exit status 1 means the call failed;
its typed code and message are printed on stderr.`,
		Example: `  libos call pid_0123... echo '{"probe":{"n":9007199254740993}}'
  libos call pid_0123... run_jit_tool '{"tool_name":"clock_now","arguments":{"timezone":"UTC"}}'
  echo '{"type":"function","function":{"name":"echo","arguments":"{\"a\":1}"}}' | libos call pid_0123... --frame -`,
		Args:              cobra.RangeArgs(1, 3),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid := args[0]
			var frame []byte
			switch {
			case frameFile != "" && len(args) > 1:
				return usageErr("call: give either --frame or NAME [ARGS-JSON], not both")
			case frameFile != "" && host:
				return usageErr("call: --frame is the model's path; --host takes NAME [ARGS-JSON]")
			case frameFile == "-":
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return usageErr("call: read the frame from stdin: %v", err)
				}
				frame = b
			case frameFile != "":
				b, err := os.ReadFile(frameFile)
				if err != nil {
					return usageErr("call: %v", err)
				}
				frame = b
			case len(args) < 2:
				return usageErr("call: name the tool (libos call PID NAME [ARGS-JSON]) or pass --frame FILE")
			}
			var rawArgs json.RawMessage
			if len(args) == 3 {
				rawArgs = json.RawMessage(args[2])
			}
			return withSystem(cmd.Context(), e, readWrite, func(sys *system) error {
				var res *engine.Result
				var err error
				switch {
				case host:
					res, err = sys.k.Runtime().Tools.Call(cmd.Context(), pid, args[1], rawArgs)
				default:
					if frame == nil {
						frame, err = mcpserver.Frame(args[1], rawArgs)
						if err != nil {
							return usageErr("%v", err)
						}
					}
					res, err = sys.k.HandleFrame(cmd.Context(), pid, frame)
				}
				if err != nil {
					if errors.Is(err, engine.ErrUnknownProcess) {
						return usageErr("%v (list processes with 'libos ps')", err)
					}
					if store.IsCorrupt(err) {
						return corruptErr(err)
					}
					fmt.Fprintf(e.stderr, "libos call: %s: %v\n", liberr.CodeOr(err, liberr.CodeToolFailed), err)
					var ee *engine.Error
					if errors.As(err, &ee) {
						for _, d := range ee.Details {
							fmt.Fprintf(e.stderr, "  at %s: %s\n", orRoot(d.Path), d.Message)
						}
					}
					return failed()
				}
				fmt.Fprintln(e.stdout, res.Text)
				e.log.Debug("call settled", "pid", pid, "call_id", res.CallID, "tool", res.Tool)
				return nil
			})
		},
	}
	c.Flags().StringVar(&frameFile, "frame", "", "read a whole provider frame from FILE (- for stdin)")
	c.Flags().BoolVar(&host, "host", false, "call through the host API (runtime.tools.call) instead of the model's path")
	return c
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func newToolsCmd(e *env) *cobra.Command {
	var format, projection, image string
	c := &cobra.Command{
		Use:   "tools [PID]",
		Short: "Print the tool list a model sees, as MCP, OpenAI or Anthropic JSON",
		Long: `tools prints the projected tool list of process PID (what the model sees) rendered for a
provider: MCP Tool objects, OpenAI function tools (strict mode where the schema allows)
or Anthropic tool definitions. Without PID it prints the list of a fresh process of the
default image (or --image), in a throwaway store.`,
		Example: `  libos tools pid_0123... --format openai
  libos tools --projection multiplexed --format anthropic`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := render.ParseProvider(format)
			if err != nil {
				return usageErr("--format: %v", err)
			}
			proj, err := parseProjection(projection)
			if err != nil {
				return err
			}
			show := func(sys *system, pid string) error {
				defs, err := sys.k.Tools(pid)
				if err != nil {
					return usageErr("%v (list processes with 'libos ps')", err)
				}
				out, err := render.Tools(defs, p)
				if err != nil {
					return usageErr("%v", err)
				}
				// Indenting raw JSON keeps the schemas' numbers as written.
				return writeJSON(e.stdout, json.RawMessage(out))
			}
			if len(args) == 1 {
				if cmd.Flags().Changed("projection") || image != "" {
					return usageErr("--projection and --image apply only without PID: they shape a fresh process")
				}
				return withSystem(cmd.Context(), e, readTools, func(sys *system) error { return show(sys, args[0]) })
			}
			return withScratch(cmd.Context(), e, func(sys *system) error {
				pid, err := sys.spawnImage(cmd.Context(), image, proj)
				if err != nil {
					return err
				}
				return show(sys, pid)
			})
		},
	}
	var providers []string
	for _, p := range render.Providers() {
		providers = append(providers, string(p))
	}
	c.Flags().StringVar(&format, "format", string(render.MCP), "rendering: "+strings.Join(providers, ", "))
	c.Flags().StringVar(&projection, "projection", "", "without PID: the projection of the fresh process (default: the image's)")
	c.Flags().StringVar(&image, "image", "", "without PID: the image of the fresh process (default: the embedded image)")
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(providers, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("projection", cobra.FixedCompletions([]string{"direct", "multiplexed"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// withScratch runs fn on a fresh store in a temporary directory, removed afterwards.
// Its users ('libos tools' and 'libos diagnose' without a PID) run no JIT tool, so the
// sandbox is lazy (mode restore).
func withScratch(ctx context.Context, e *env, fn func(*system) error) (err error) {
	dir, err := os.MkdirTemp("", "libos-scratch-")
	if err != nil {
		return usageErr("temporary store: %v", err)
	}
	defer os.RemoveAll(dir)
	sys, err := openSystem(ctx, dir, e, restore)
	if err != nil {
		return err
	}
	return runClosing(sys, fn)
}

func newSyscallsCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "syscalls",
		Short: "Print the syscall route table",
		Long: `syscalls prints every route a JIT tool can reach with libos.syscall: its name, the
capability it requires, its approval class, its side effects, the provider that serves
it, the slots of the image's route policy it reads (approval, budget, size, net,
secrets, labels, data_flow: what an image may set for it) and its documentation line.
--json adds the argument and result JSON Schemas and, for each slot, where the image
manifest holds it.

This is operator documentation: a model has no way to list routes.`,
		Example: `  libos syscalls
  libos syscalls --json | jq '.[] | select(.name=="clock.now")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			routes := syscalls.Routes()
			type slot struct {
				Slot  string `json:"slot"`
				Field string `json:"field"` // where the image manifest holds it
			}
			type route struct {
				Name         string          `json:"name"`
				Doc          string          `json:"doc"`
				Capability   string          `json:"capability"`
				Approval     string          `json:"approval"`
				Effect       string          `json:"effect"`
				Provider     string          `json:"provider"`
				ArgsSchema   json.RawMessage `json:"args_schema"`
				ResultSchema json.RawMessage `json:"result_schema"`
				Policy       []slot          `json:"policy"`
			}
			out := make([]route, 0, len(routes))
			for _, r := range routes {
				slots := make([]slot, 0, len(r.Policy))
				for _, s := range r.Policy {
					slots = append(slots, slot{string(s), s.FieldName()})
				}
				out = append(out, route{r.Name, r.Doc, string(r.Capability), string(r.Approval), string(r.Effect), r.Provider, r.ArgsSchema, r.ResultSchema, slots})
			}
			return printTable(e.stdout, out, asJSON, "ROUTE\tCAPABILITY\tAPPROVAL\tEFFECT\tPROVIDER\tPOLICY\tDOC", func(w io.Writer, r route) {
				slots := make([]string, len(r.Policy))
				for i, s := range r.Policy {
					slots[i] = s.Slot
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Capability, r.Approval, r.Effect, r.Provider, strings.Join(slots, ","), r.Doc)
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON with the argument and result schemas")
	return c
}

func newPsCmd(e *env) *cobra.Command {
	var asJSON bool
	var natsURL, natsTokenFile string
	c := &cobra.Command{
		Use:   "ps",
		Short: "List the processes in the store",
		Long: `ps lists every process the store holds, killed ones included: PID, state, image,
projection, capabilities and when it was created. When 'libos serve' holds the store,
the list comes from it.

In the replicated mode (serve --cluster), --nats URL adds the HOST that serves each
process: the holder of its lease in the cluster ("-" when no host holds it now).`,
		Example: `  libos ps
  libos ps --data ./agent-store --json
  libos ps --nats nats://127.0.0.1:4222
  libos ps --nats nats://10.0.0.1:4222 --nats-token-file /etc/libos/cluster-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if natsTokenFile != "" && natsURL == "" {
				return usageErr("--nats-token-file goes with --nats")
			}
			token, err := readClusterToken(natsTokenFile)
			if err != nil {
				return err
			}
			var procs []engine.ProcessInfo
			if err := e.op(cmd.Context(), opRequest{Op: "processes"}, &procs); err != nil {
				return err
			}
			type row struct {
				PID          string    `json:"pid"`
				State        string    `json:"state"`
				Image        string    `json:"image"`
				ImageVersion string    `json:"image_version"`
				Projection   string    `json:"projection"`
				Capabilities []string  `json:"capabilities"`
				ActiveSkills []string  `json:"active_skills"`
				Parent       string    `json:"parent,omitempty"`
				Created      time.Time `json:"created"`
				Host         string    `json:"host,omitempty"`
			}
			where := map[string]string{}
			if natsURL != "" {
				ps, err := cluster.ReadPlacementsWithToken(cmd.Context(), natsURL, "", token)
				if err != nil {
					return usageErr("--nats %s: %v", cluster.RedactURL(natsURL), err)
				}
				for _, p := range ps {
					where[p.PID] = p.Host
				}
			}
			rows := []row{}
			for _, p := range procs {
				caps := p.Capabilities
				if caps == nil {
					caps = []string{}
				}
				active := p.ActiveSkills
				if active == nil {
					active = []string{}
				}
				r := row{p.PID, p.State, p.Image, p.ImageVersion, string(p.Projection), caps, active, p.Parent, p.Created.UTC(), ""}
				if natsURL != "" {
					r.Host = where[p.PID]
					if r.Host == "" {
						r.Host = "-"
					}
				}
				rows = append(rows, r)
			}
			header := "PID\tSTATE\tIMAGE\tPROJECTION\tCREATED\tCAPABILITIES"
			if natsURL != "" {
				header = "PID\tHOST\tSTATE\tIMAGE\tPROJECTION\tCREATED\tCAPABILITIES"
			}
			return printTable(e.stdout, rows, asJSON, header, func(w io.Writer, r row) {
				host := ""
				if natsURL != "" {
					// A lease's host is whatever was written to the lease bucket.
					host = printable(r.Host) + "\t"
				}
				fmt.Fprintf(w, "%s\t%s%s\t%s@%s\t%s\t%s\t%s\n", r.PID, host, r.State, r.Image, r.ImageVersion, r.Projection, r.Created.Format(time.RFC3339), strings.Join(r.Capabilities, ","))
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().StringVar(&natsURL, "nats", "", "the cluster's NATS URL: show the host serving each process")
	c.Flags().StringVar(&natsTokenFile, "nats-token-file", "", "file holding the cluster's token (libos serve --nats-token-file), presented to --nats")
	return c
}

func newEventsCmd(e *env) *cobra.Command {
	var verify, asJSON, follow, printHead, rejected bool
	var after uint64
	var expectHead string
	c := &cobra.Command{
		Use:   "events PID",
		Short: "Print a process's event log; --verify checks its hash chain, --follow waits for more",
		Long: `events prints the append-only event log of process PID: sequence number, time, type,
call ID and data. --verify checks the whole hash chain (each event carries the hash of
the previous one, and the head record the last) and exits 1 when any event was edited,
removed, inserted or reordered, naming the first bad sequence number. --follow keeps
printing new events as they are appended (by a running 'libos serve', for instance)
until interrupted.

A chain checks itself, not its length: a store cut back to an earlier state (its newest
events and head record lost together, as when the newest WAL file is deleted) is a
shorter chain that verifies. --head verifies the log and prints its head as SEQ:HASH;
keep that line somewhere else, and --verify --expect-head SEQ:HASH later fails when the
log is shorter than SEQ or its event SEQ has another hash.`,
		Example: `  libos events pid_0123...
  libos events pid_0123... --verify
  libos events pid_0123... --head > head.txt
  libos events pid_0123... --verify --expect-head "$(cat head.txt)"
  libos events pid_0123... --follow --json --after 10`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, pid := cmd.Context(), args[0]
			if (verify || printHead) && follow {
				return usageErr("--verify and --head do not go with --follow: verify a log, or follow it")
			}
			var anchor *headAnchor
			if expectHead != "" {
				if !verify {
					return usageErr("--expect-head needs --verify")
				}
				a, err := parseHeadAnchor(expectHead)
				if err != nil {
					return usageErr("--expect-head: %v", err)
				}
				anchor = &a
			}
			if err := e.knownProcess(ctx, pid); err != nil {
				return err
			}
			if printHead {
				return e.printHead(ctx, pid)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			if !asJSON && !rejected {
				fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tCALL\tDATA")
			}
			n := 0
			var last store.Event
			for {
				var evs []store.Event
				if err := e.op(ctx, opRequest{Op: "events", PID: pid, After: after}, &evs); err != nil {
					if follow && ctx.Err() != nil {
						// Interrupted while asking for more: the way --follow ends,
						// whenever the signal comes.
						_ = tw.Flush()
						return nil
					}
					return err
				}
				for _, ev := range evs {
					n++
					after, last = ev.Seq, ev
					if rejected {
						if ev.Type == engine.EventProtocolRejected {
							printRejected(e.stdout, ev, asJSON)
						}
						continue
					}
					if asJSON {
						b, _ := json.Marshal(ev)
						fmt.Fprintln(e.stdout, string(b))
						continue
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", ev.Seq, ev.Time.UTC().Format("2006-01-02T15:04:05.000Z"), ev.Type, ev.CallID, ev.Data)
				}
				if len(evs) > 0 {
					continue
				}
				_ = tw.Flush()
				if !follow {
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(300 * time.Millisecond):
				}
			}
			if !verify {
				return nil
			}
			if err := e.op(ctx, opRequest{Op: "verify", PID: pid}, nil); err != nil {
				if store.IsCorrupt(err) {
					return err // a damaged store, not a broken chain: exit 2
				}
				fmt.Fprintf(e.stderr, "libos events: %v\n", err)
				return failed()
			}
			if anchor != nil {
				if err := e.checkAnchor(ctx, pid, last, *anchor); err != nil {
					fmt.Fprintf(e.stderr, "libos events: %v\n", err)
					return failed()
				}
				fmt.Fprintf(e.stderr, "verified: %d events, hash chain intact, head %d %s, expected head %d present\n", n, last.Seq, hex.EncodeToString(last.Hash), anchor.seq)
				return nil
			}
			fmt.Fprintf(e.stderr, "verified: %d events, hash chain intact, head %d %s\n", n, last.Seq, hex.EncodeToString(last.Hash))
			return nil
		},
	}
	c.Flags().BoolVar(&printHead, "head", false, "verify the log and print its head as SEQ:HASH, to keep elsewhere for --expect-head")
	c.Flags().StringVar(&expectHead, "expect-head", "", "with --verify: fail unless the log reaches SEQ and its event SEQ has HASH (from --head)")
	c.Flags().BoolVar(&verify, "verify", false, "verify the hash chain; exit 1 when it is broken")
	c.Flags().BoolVar(&rejected, "rejected", false, "print only the frames the adapter rejected (protocol_rejected), each with its reason and the frame kept as evidence")
	c.Flags().BoolVar(&follow, "follow", false, "keep printing new events until interrupted")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON event per line")
	c.Flags().Uint64Var(&after, "after", 0, "print only events after this sequence number")
	return c
}

func newCandidatesCmd(e *env) *cobra.Command {
	var asJSON bool
	var discard, reason string
	c := &cobra.Command{
		Use:   "candidates PID",
		Short: "List the JIT tool candidates of a process and their validation evidence",
		Long: `candidates lists the JIT tool candidates process PID proposed: ID, name, state
(proposed, validated, rejected, registered, discarded) and the outcome of each
validation attempt. --json prints the whole records, source and evidence included.

--discard ID discards candidate ID of PID, one that was never registered: it keeps its
record, and validate_jit_tool and register_jit_tool refuse it from then on
(candidate_discarded). A jit_discarded event records it, by the operator, with --reason.`,
		Example: `  libos candidates pid_0123...
  libos candidates pid_0123... --json | jq '.[0].validations'
  libos candidates pid_0123... --discard tcand_0123... --reason "superseded"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid := args[0]
			if discard != "" {
				if err := e.op(cmd.Context(), opRequest{Op: "discard_candidate", PID: pid, ID: discard, Reason: reason}, nil); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "discarded %s: %s\n", pid, printable(discard))
				return nil
			}
			if cmd.Flags().Changed("reason") {
				return usageErr("--reason goes with --discard ID")
			}
			{
				if err := e.knownProcess(cmd.Context(), pid); err != nil {
					return err
				}
				return opTable(cmd.Context(), e, opRequest{Op: "candidates", PID: pid}, asJSON,
					"CANDIDATE\tNAME\tSTATE\tVALIDATIONS\tCREATED", func(w io.Writer, c store.Candidate) {
						var vs []string
						for _, v := range c.Validations {
							if v.OK {
								vs = append(vs, "ok")
							} else {
								vs = append(vs, "rejected")
							}
						}
						if len(vs) == 0 {
							vs = []string{"-"}
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name, c.State, strings.Join(vs, ","), c.Created.UTC().Format(time.RFC3339))
					})
			}
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the full candidate records as JSON")
	c.Flags().StringVar(&discard, "discard", "", "discard candidate `ID` of the process (never a registered one)")
	c.Flags().StringVar(&reason, "reason", "discarded by the operator", "with --discard: why, as the jit_discarded event records it")
	return c
}

// knownProcess refuses a PID the store does not hold. A killed process is known: its
// log and candidates stay readable.
func (e *env) knownProcess(ctx context.Context, pid string) error {
	var info engine.ProcessInfo
	err := e.op(ctx, opRequest{Op: "process", PID: pid}, &info)
	if err == nil {
		return nil
	}
	var all []engine.ProcessInfo
	if lerr := e.op(ctx, opRequest{Op: "processes"}, &all); lerr == nil {
		for _, p := range all {
			if p.PID == pid {
				return nil
			}
		}
	}
	return usageErr("process %s: %v (list processes with 'libos ps')", pid, err)
}

// headAnchor is a head exported by --head: a sequence number and the hash of that event.
type headAnchor struct {
	seq  uint64
	hash []byte
}

func parseHeadAnchor(s string) (headAnchor, error) {
	seqText, hashText, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return headAnchor{}, fmt.Errorf("%q is not SEQ:HASH as 'libos events PID --head' prints it", s)
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return headAnchor{}, fmt.Errorf("sequence %q is not a number", seqText)
	}
	hash, err := hex.DecodeString(hashText)
	if err != nil || len(hash) != sha256.Size {
		return headAnchor{}, fmt.Errorf("hash %q is not %d hex bytes", hashText, sha256.Size)
	}
	return headAnchor{seq: seq, hash: hash}, nil
}

// printHead verifies pid's log and prints its head as SEQ:HASH.
func (e *env) printHead(ctx context.Context, pid string) error {
	if err := e.op(ctx, opRequest{Op: "verify", PID: pid}, nil); err != nil {
		if store.IsCorrupt(err) {
			return err
		}
		fmt.Fprintf(e.stderr, "libos events: %v\n", err)
		return failed()
	}
	var last store.Event
	for after := uint64(0); ; {
		var evs []store.Event
		if err := e.op(ctx, opRequest{Op: "events", PID: pid, After: after}, &evs); err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1]
		after = last.Seq
	}
	hash := last.Hash
	if last.Seq == 0 {
		hash = make([]byte, sha256.Size)
	}
	fmt.Fprintf(e.stdout, "%d:%s\n", last.Seq, hex.EncodeToString(hash))
	return nil
}

// checkAnchor checks a verified log, whose last event is last, against an exported head:
// the log must reach the anchor's sequence, and its event there must have the anchor's
// hash. Since the chain verified, every event before it is then the one exported too.
func (e *env) checkAnchor(ctx context.Context, pid string, last store.Event, a headAnchor) error {
	return a.heldBy(pid, last.Seq, func(seq uint64) (*store.Event, error) {
		var evs []store.Event
		if err := e.op(ctx, opRequest{Op: "events", PID: pid, After: seq - 1}, &evs); err != nil || len(evs) == 0 || evs[0].Seq != seq {
			return nil, err
		}
		return &evs[0], nil
	})
}

// checkStore is checkAnchor for a store this command opened itself (tape, replay),
// judged on the head record and the event at the anchor's sequence. It does not walk the
// chain: both commands verify the log themselves before they read a call from it
// (tools.ExportTape and tools.Replay refuse one that does not verify), so a log they read
// both verifies and holds the anchor.
func (a headAnchor) checkStore(st *store.Store, pid string) error {
	head, err := st.Head(pid)
	if err != nil {
		return err
	}
	return a.heldBy(pid, head.Seq, func(seq uint64) (*store.Event, error) {
		ev, err := st.Event(pid, seq)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return &ev, err
	})
}

// heldBy judges a log that ends at lastSeq against the anchor: eventAt reads the log's
// event at a sequence (nil when it has none), and is asked only when the log reaches the
// anchor. A log that does not hold it is a store.VerifyFailed error.
func (a headAnchor) heldBy(pid string, lastSeq uint64, eventAt func(seq uint64) (*store.Event, error)) error {
	if a.seq == 0 {
		return nil
	}
	if lastSeq < a.seq {
		return store.VerifyFailed(pid, lastSeq+1, fmt.Sprintf(
			"the log ends at %d, before the expected head %d: events %d to %d were removed (the store was cut back or rolled back)", lastSeq, a.seq, lastSeq+1, a.seq))
	}
	at, err := eventAt(a.seq)
	switch {
	case err != nil:
		return err
	case at == nil:
		return store.VerifyFailed(pid, a.seq, "the expected head's event is missing")
	case !bytes.Equal(at.Hash, a.hash):
		return store.VerifyFailed(pid, a.seq, fmt.Sprintf(
			"hash %s differs from the expected head's %s: this is another log", hex.EncodeToString(at.Hash), hex.EncodeToString(a.hash)))
	}
	return nil
}

// printRejected prints one protocol_rejected event as repair evidence: why the frame
// was refused and the frame as kept (its first engine.MaxRejectedFrameBytes), with its
// size and digest.
func printRejected(w io.Writer, ev store.Event, asJSON bool) {
	var d struct {
		Code        string `json:"code"`
		Reason      string `json:"reason"`
		Via         string `json:"via"`
		Bytes       int    `json:"frame_bytes"`
		SHA256      string `json:"frame_sha256"`
		Frame       string `json:"frame"`
		FrameBase64 string `json:"frame_base64"`
		Truncated   bool   `json:"frame_truncated"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	if asJSON {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%d\t%s\tvia %s\t%s: %s\n", ev.Seq, ev.Time.UTC().Format("2006-01-02T15:04:05.000Z"), d.Via, d.Code, d.Reason)
	kept := "whole"
	if d.Truncated {
		kept = fmt.Sprintf("first %d bytes", engine.MaxRejectedFrameBytes)
	}
	fmt.Fprintf(w, "  frame: %d bytes, sha256 %s, kept %s\n", d.Bytes, d.SHA256, kept)
	switch {
	case d.FrameBase64 != "":
		fmt.Fprintf(w, "  base64: %s\n", d.FrameBase64)
	default:
		fmt.Fprintf(w, "  %s\n", strconv.Quote(d.Frame))
	}
}
