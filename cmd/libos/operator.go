package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	los "github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
)

// The operator channel: while 'libos serve' holds a store, the operator commands
// (approve, deny, grant, revoke, approvals, ps, events, candidates) reach its kernel
// through a Unix socket that only the same user can connect to; without a server they
// open the store themselves. The channel carries the kernel's operator API as JSON and
// adds nothing to it. Where the socket lives and why a client may trust it: opsocket.go.

// opRequest is one operator call over the socket.
type opRequest struct {
	Op     string `json:"op"`
	PID    string `json:"pid,omitempty"`
	ID     string `json:"id,omitempty"`
	Cap    string `json:"capability,omitempty"`
	Reason string `json:"reason,omitempty"`
	After  uint64 `json:"after,omitempty"`
	Name   string `json:"name,omitempty"`
}

type opError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details []engine.Detail `json:"details,omitempty"`
}

// operate runs one operator call on sys.
func operate(ctx context.Context, sys *los.System, r opRequest) (any, error) {
	k := sys.Kernel
	switch r.Op {
	case "approve":
		return nil, k.Approve(ctx, r.ID)
	case "deny":
		return nil, k.Deny(ctx, r.ID, r.Reason)
	case "grant":
		return nil, k.Grant(ctx, r.PID, r.Cap)
	case "revoke":
		return nil, k.Revoke(ctx, r.PID, r.Cap)
	case "deactivate_skill":
		if r.Name == "" {
			return nil, k.DeactivateSkills(ctx, r.PID)
		}
		return k.DeactivateSkill(ctx, r.PID, r.Name)
	case "approvals":
		if r.PID != "" {
			return k.Approvals(r.PID)
		}
		return k.PendingApprovals()
	case "processes":
		return k.ListProcesses()
	case "process":
		return k.Process(r.PID)
	case "events":
		return k.Events(r.PID, r.After, 0)
	case "verify":
		return nil, k.VerifyLog(r.PID)
	case "candidates":
		return k.Candidates(r.PID)
	case "bindings":
		// A killed process keeps its bindings' records; an unknown PID is an error,
		// not an empty list.
		if _, err := sys.Store().Process(r.PID); errors.Is(err, store.ErrNotFound) {
			return nil, &engine.Error{Layer: "engine", Code: engine.CodeUnknownProcess, Message: fmt.Sprintf("no process %q", r.PID)}
		}
		return k.Bindings(r.PID)
	case "revoke_tool":
		return nil, k.RevokeBinding(ctx, r.PID, r.Name, r.Reason)
	case "pause":
		return nil, k.Pause(ctx, r.PID)
	case "resume":
		return nil, k.Resume(ctx, r.PID)
	case "kill":
		return nil, k.Kill(ctx, r.PID)
	case "checkpoint":
		id, err := k.Checkpoint(ctx, r.PID)
		return map[string]string{"checkpoint_id": id}, err
	case "fork":
		pid, err := k.Fork(ctx, r.ID)
		return map[string]string{"pid": pid}, err
	case "discard_candidate":
		return nil, sys.DiscardCandidate(ctx, r.PID, r.ID, r.Reason)
	}
	return nil, fmt.Errorf("unknown operator call %q", r.Op)
}

// serveOperator answers operator calls for k on the socket of dir until stop is
// called. The socket is private to the user (see listenOperator); when it cannot be,
// the server runs without it and says why.
func serveOperator(ctx context.Context, e *env, sys *los.System, dir string) (stop func()) {
	ln, err := listenOperator(dir)
	if err != nil {
		e.log.Warn("no operator channel: approve, deny, grant and revoke will not reach this server", "err", err)
		return func() {}
	}
	e.log.Debug("operator channel", "socket", ln.path)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/op", func(w http.ResponseWriter, req *http.Request) {
		var r opRequest
		dec := json.NewDecoder(io.LimitReader(req.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(opError{Code: "invalid_request", Message: err.Error()})
			return
		}
		out, err := operate(req.Context(), sys, r)
		if err != nil {
			oe := opError{Code: string(liberr.CodeOr(err, liberr.CodeToolFailed)), Message: err.Error()}
			var ee *engine.Error
			if errors.As(err, &ee) {
				oe.Details = ee.Details
			}
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(oe)
			return
		}
		e.log.Info("operator", "op", r.Op, "pid", r.PID, "id", r.ID, "capability", r.Cap, "name", r.Name)
		_ = json.NewEncoder(w).Encode(out)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		ln.remove()
	}
}

// errNoServer: no server answers on the store's socket.
var errNoServer = errors.New("no server")

// remoteOp sends r to the server holding the store in dir and decodes its answer
// into out.
func remoteOp(ctx context.Context, dir string, r opRequest, out any) error {
	path, err := findOperator(dir)
	if errors.Is(err, errUnsafeOperatorSocket) {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w; nothing was sent to it", err)}
	}
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}, Timeout: 30 * time.Second}
	body, _ := json.Marshal(r)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://libos/v1/op", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return errNoServer // a socket nobody listens on: the server is gone
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return usageErr("operator channel: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		var oe opError
		_ = json.Unmarshal(b, &oe)
		msg := oe.Message
		for _, d := range oe.Details {
			msg += fmt.Sprintf("\n  %s: %s", orRoot(d.Path), d.Message)
		}
		code := exitFailed
		if oe.Code == string(engine.CodeUnknownProcess) {
			code = exitUsage
		}
		return &exitError{code: code, err: fmt.Errorf("%s (%s)", msg, oe.Code)}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// op runs r on the server holding the store, or on the store itself when no server
// runs.
func (e *env) op(ctx context.Context, r opRequest, out any) error {
	dir, err := e.dataDirectory()
	if err != nil {
		return err
	}
	err = remoteOp(ctx, dir, r, out)
	if !errors.Is(err, errNoServer) {
		return err
	}
	// No operator call runs a tool: a decision on an approval is the waiting call's
	// server's to act on, and a fork installs tools without running them.
	mode := restore
	switch r.Op {
	case "processes", "process", "events", "verify", "candidates", "approvals", "bindings":
		mode = readOnly
	}
	return withSystem(ctx, e, mode, func(sys *system) error {
		res, err := operate(ctx, sys.System, r)
		if err != nil {
			if store.IsCorrupt(err) {
				return corruptErr(err)
			}
			code := exitFailed
			if liberr.CodeOf(err) == engine.CodeUnknownProcess {
				code = exitUsage
			}
			return &exitError{code: code, err: fmt.Errorf("%s (%s)", describe(err), liberr.CodeOr(err, liberr.CodeToolFailed))}
		}
		if out != nil {
			b, _ := json.Marshal(res)
			return json.Unmarshal(b, out)
		}
		return nil
	})
}

func operatorCmds(e *env) []*cobra.Command {
	approve := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a pending operator approval",
		Long: `approve grants pending approval ID: the call waiting on it proceeds, provided the tool's
definition is still the one the approval was asked for. The decision is durable and
recorded in the asking process's event log. When 'libos serve' holds the store the
decision goes to it (the waiting call is there); list pending approvals with
'libos approvals'.`,
		Example: `  libos approvals
  libos approve appr_0123...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.op(cmd.Context(), opRequest{Op: "approve", ID: args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "approved %s\n", args[0])
			return nil
		},
	}
	var reason string
	deny := &cobra.Command{
		Use:   "deny ID",
		Short: "Deny a pending operator approval",
		Long: `deny refuses pending approval ID: the waiting call fails with approval_denied and the
reason. The decision is durable and recorded in the asking process's event log.`,
		Example: `  libos deny appr_0123... --reason "not during the freeze"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.op(cmd.Context(), opRequest{Op: "deny", ID: args[0], Reason: reason}, nil); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "denied %s\n", args[0])
			return nil
		},
	}
	deny.Flags().StringVar(&reason, "reason", "denied by the operator", "why, as the waiting call will report it")

	var asJSON bool
	approvals := &cobra.Command{
		Use:   "approvals [PID]",
		Short: "List pending approvals (or every approval of PID)",
		Long: `approvals lists the approvals waiting for an operator decision, oldest first: ID, process,
kind (tool or route), subject, arguments and deadline. With PID it lists every approval
of that process, decided ones included.`,
		Example: `  libos approvals
  libos approvals pid_0123... --json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := opRequest{Op: "approvals"}
			if len(args) == 1 {
				r.PID = args[0]
			}
			return opTable(cmd.Context(), e, r, asJSON,
				"APPROVAL\tPID\tSTATE\tKIND\tSUBJECT\tARGUMENTS\tDEADLINE", func(w io.Writer, a engine.Approval) {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.PID, a.State, a.Kind, a.Subject, a.Args, a.Deadline.UTC().Format(time.RFC3339))
				})
		},
	}
	approvals.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	capCmd := func(op, short, long string) *cobra.Command {
		c := &cobra.Command{
			Use:               op + " PID CAPABILITY",
			Short:             short,
			Long:              long,
			Example:           fmt.Sprintf("  libos %s pid_0123... clock:now", op),
			Args:              cobra.ExactArgs(2),
			ValidArgsFunction: pidArgs(e),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := e.op(cmd.Context(), opRequest{Op: op, PID: args[0], Cap: args[1]}, nil); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "%s %s: %s\n", map[string]string{"grant": "granted", "revoke": "revoked"}[op], args[0], args[1])
				return nil
			},
		}
		return c
	}
	grant := capCmd("grant", "Grant a capability to a process",
		`grant gives process PID a capability (one that some syscall route requires; see
'libos syscalls'). It is durable, with a capability_granted event, before the process
can use it. When 'libos serve' holds the store, the grant goes to it.`)
	revoke := capCmd("revoke", "Revoke a capability from a process",
		`revoke takes a capability from process PID. It takes effect at once: the next
capability check of every call of the process refuses it, calls already running
included. A capability_revoked event records it.`)

	deactivate := &cobra.Command{
		Use:   "deactivate-skill PID [SKILL]",
		Short: "Deactivate a Skill of a process (every active one without SKILL)",
		Long: `deactivate-skill leaves Skill SKILL of process PID, as the model's deactivate_skill tool
does; without SKILL it deactivates every active Skill. A skill_deactivated event records it.
When 'libos serve' holds the store, the change goes to it.`,
		Example:           "  libos deactivate-skill pid_0123... protocol-diagnostics",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: pidArgs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := opRequest{Op: "deactivate_skill", PID: args[0]}
			if len(args) == 2 {
				r.Name = args[1]
			}
			if err := e.op(cmd.Context(), r, nil); err != nil {
				return err
			}
			what := "every Skill"
			if r.Name != "" {
				what = r.Name
			}
			fmt.Fprintf(e.stdout, "deactivated %s: %s\n", args[0], what)
			return nil
		},
	}

	cmds := []*cobra.Command{approvals, approve, deny, grant, revoke, deactivate}
	cmds = append(cmds, cleanupCmds(e)...)
	return append(cmds, newImagesCmd(e), newSkillsCmd(e))
}

func newImagesCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "images [FILE...]",
		Short: "Show the embedded image, or check image manifests",
		Long: `images prints the image 'libos serve' spawns by default: its tools, capabilities,
projection, Skills, its egress (hosts, methods, sizes, addresses), secrets (where each
may be sent) and data-flow rules (labels and the sinks they may not reach) in words,
and its digest. With FILE arguments it loads and checks each
image manifest (YAML or JSON, Skills relative to the manifest) and lists every problem
of an invalid one; the exit status is 1 when any is invalid.`,
		Example: `  libos images
  libos images ./my-image.yaml --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := args
			if len(paths) == 0 {
				paths = []string{""}
			}
			bad := 0
			var all []*image.Image
			for _, p := range paths {
				img, err := loadImage(p, "")
				if err != nil {
					bad++
					fmt.Fprintf(e.stderr, "%s: %v\n", p, err)
					continue
				}
				all = append(all, img)
				if asJSON {
					continue
				}
				name := p
				if name == "" {
					name = "(embedded)"
				}
				skills := make([]string, 0, len(img.Skills))
				for _, s := range img.Skills {
					skills = append(skills, s.Name)
				}
				fmt.Fprintf(e.stdout, "%s: %s %s\n", name, img.Name, img.Version)
				fmt.Fprintf(e.stdout, "  tools         %s\n", strings.Join(img.Tools, ", "))
				fmt.Fprintf(e.stdout, "  capabilities  %s\n", strings.Join(img.Capabilities, ", "))
				fmt.Fprintf(e.stdout, "  projection    %s\n", img.Projection)
				fmt.Fprintf(e.stdout, "  skills        %s\n", strings.Join(skills, ", "))
				// The route policy in words, every slot: approvals, budgets and size
				// bounds per route, what a JIT tool of this image may reach, what it may
				// send by reference, and where labelled data may go.
				if pol, probs := syscalls.CompilePolicy(img.Policy()); probs == nil {
					lines := append(pol.ExplainRoutes(), pol.Explain()...)
					for _, line := range append(lines, pol.ExplainDataFlow()...) {
						fmt.Fprintf(e.stdout, "  %s\n", line)
					}
				}
				fmt.Fprintf(e.stdout, "  digest        %s\n", img.Digest())
			}
			if asJSON {
				if err := writeJSON(e.stdout, all); err != nil {
					return usageErr("%v", err)
				}
			}
			if bad > 0 {
				return failed()
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the images as JSON, Skills included")
	return c
}

func newSkillsCmd(e *env) *cobra.Command {
	skills := &cobra.Command{
		Use:   "skills",
		Short: "Work with Skill documents (SKILL.md)",
	}
	check := &cobra.Command{
		Use:   "check PATH...",
		Short: "Check Skill documents and list every problem",
		Long: `check parses each Skill document as a process would load it: YAML front matter with name,
description and allowed-tools, then the instructions. A PATH is a SKILL.md file, a
directory holding one, or a directory of such directories. Every problem of every
document is listed (for instance run_jit_tool in allowed-tools: it is never a process
tool); the exit status is 1 when any document is invalid.`,
		Example: `  libos skills check tools/skills/
  libos skills check my-skill/SKILL.md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files []string
			for _, a := range args {
				fi, err := os.Stat(a)
				if err != nil {
					return usageErr("%v", err)
				}
				if !fi.IsDir() {
					files = append(files, a)
					continue
				}
				found, _ := filepath.Glob(filepath.Join(a, "SKILL.md"))
				more, _ := filepath.Glob(filepath.Join(a, "*", "SKILL.md"))
				found = append(found, more...)
				if len(found) == 0 {
					return usageErr("%s: no SKILL.md in it or in its subdirectories", a)
				}
				sort.Strings(found)
				files = append(files, found...)
			}
			bad := 0
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return usageErr("%v", err)
				}
				s, err := image.ParseSkill(b)
				if err != nil {
					bad++
					fmt.Fprintf(e.stdout, "FAIL %s\n", f)
					var ee *engine.Error
					if errors.As(err, &ee) && len(ee.Details) > 0 {
						for _, d := range ee.Details {
							fmt.Fprintf(e.stdout, "  %s: %s: %s\n", f, orRoot(d.Path), d.Message)
						}
					} else {
						fmt.Fprintf(e.stdout, "  %s: %v\n", f, err)
					}
					continue
				}
				fmt.Fprintf(e.stdout, "ok   %s (%s; allowed-tools: %s)\n", f, s.Name, strings.Join(s.AllowedTools, " "))
			}
			fmt.Fprintf(e.stdout, "%d passed, %d failed\n", len(files)-bad, bad)
			if bad > 0 {
				return failed()
			}
			return nil
		},
	}
	skills.AddCommand(check)
	return skills
}

// opTable runs the listing r and prints its rows: as a JSON array with asJSON (an
// empty list is [], never null), else as a table under header, one row a line.
func opTable[T any](ctx context.Context, e *env, r opRequest, asJSON bool, header string, row func(io.Writer, T)) error {
	var list []T
	if err := e.op(ctx, r, &list); err != nil {
		return err
	}
	return printTable(e.stdout, list, asJSON, header, row)
}

// printTable prints list, every listing's one format: a JSON array with asJSON (an
// empty list is [], never null), else a table under header, one row a line.
func printTable[T any](w io.Writer, list []T, asJSON bool, header string, row func(io.Writer, T)) error {
	if list == nil {
		list = []T{}
	}
	if asJSON {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, v := range list {
		row(tw, v)
	}
	return tw.Flush()
}
