package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/store"
)

// The host's cleanup and coordination commands: what the Skills tell a model to stop
// and leave to the operator. Each is the kernel's (or the System's) operator API over
// the operator channel, and each is recorded in the process's event log with by
// "operator".

func cleanupCmds(e *env) []*cobra.Command {
	var asJSON bool
	bindings := &cobra.Command{
		Use:   "bindings PID",
		Short: "List the JIT tools registered in a process",
		Long: `bindings lists the committed JIT tool bindings of process PID: name, tool ID, the
candidate it runs and the process that owns that candidate (another one for a fork),
scope and when it was bound. A killed process keeps its records.`,
		Example:           "  libos bindings pid_0123...\n  libos bindings pid_0123... --json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opTable(cmd.Context(), e, opRequest{Op: "bindings", PID: args[0]}, asJSON,
				"NAME\tTOOL\tCANDIDATE\tCANDIDATE PID\tSCOPE\tCREATED", func(w io.Writer, b store.Binding) {
					owner := b.CandidatePID
					if owner == "" {
						owner = b.PID
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(b.Name), b.ToolID, b.CandidateID, owner, b.Scope, b.Created.UTC().Format(time.RFC3339))
				})
		},
	}
	bindings.Flags().BoolVar(&asJSON, "json", false, "print the bindings as JSON")

	var revokeReason string
	revokeTool := &cobra.Command{
		Use:   "revoke-tool PID NAME",
		Short: "Remove a registered JIT tool from a process",
		Long: `revoke-tool removes JIT tool NAME from process PID (the model has no unregister): it
leaves the tool table and its binding is deleted, with a jit_revoked event (by the
operator, with the reason) and a tools_changed event in one batch. Its candidate keeps
its history and stays registered, so it cannot be registered again; the name is free
only for a new candidate.`,
		Example:           `  libos revoke-tool pid_0123... clock_now --reason "returns the wrong zone"`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.op(cmd.Context(), opRequest{Op: "revoke_tool", PID: args[0], Name: args[1], Reason: revokeReason}, nil); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "revoked tool %s: %s\n", args[0], printable(args[1]))
			return nil
		},
	}
	revokeTool.Flags().StringVar(&revokeReason, "reason", "revoked by the operator", "why, as the jit_revoked event records it")

	state := func(op, done, short, long string) *cobra.Command {
		return &cobra.Command{
			Use:               op + " PID",
			Short:             short,
			Long:              long,
			Example:           fmt.Sprintf("  libos %s pid_0123...", op),
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: pidArgs(e),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := e.op(cmd.Context(), opRequest{Op: op, PID: args[0]}, nil); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "%s %s\n", done, args[0])
				return nil
			},
		}
	}
	pause := state("pause", "paused", "Pause a process: it refuses every call until resumed",
		`pause makes process PID refuse every tool call (process_paused, recorded as
call_rejected) until 'libos resume'. Calls already running finish. A process_paused
event records it.`)
	resume := state("resume", "resumed", "Resume a paused process",
		`resume lets paused process PID take calls again. A process_resumed event records it.`)
	kill := state("kill", "killed", "Kill a process",
		`kill ends process PID: later calls get unknown_process and its pending approvals are
denied, in the same batch as the process_killed event. Its record, log, candidates and
checkpoints are kept; a checkpoint of it can still be forked.`)

	checkpoint := &cobra.Command{
		Use:   "checkpoint PID",
		Short: "Take a durable checkpoint of a process",
		Long: `checkpoint records a snapshot of process PID (image, capabilities, projection, active
Skills, key/value space, JIT bindings, budget counters) and prints its ID, for
'libos fork'. A checkpoint_created event records it.`,
		Example:           "  libos checkpoint pid_0123...",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				ID string `json:"checkpoint_id"`
			}
			if err := e.op(cmd.Context(), opRequest{Op: "checkpoint", PID: args[0]}, &out); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, out.ID)
			return nil
		},
	}
	fork := &cobra.Command{
		Use:   "fork CHECKPOINT",
		Short: "Start a new process from a checkpoint",
		Long: `fork creates a new process from checkpoint CHECKPOINT and prints its PID. The fork has
new identities: a new PID, and every JIT tool of the snapshot bound again under a new
tool ID, running the same candidate. process_forked in the new log and checkpoint_forked
in the checkpoint's record it.`,
		Example: "  libos fork ckpt_0123...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				PID string `json:"pid"`
			}
			if err := e.op(cmd.Context(), opRequest{Op: "fork", ID: args[0]}, &out); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, out.PID)
			return nil
		},
	}
	return []*cobra.Command{bindings, revokeTool, pause, resume, kill, checkpoint, fork}
}
