package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/agent"
	"github.com/agentlibos/libos/cmd/libos/internal/diag"
	"github.com/agentlibos/libos/engine"
)

type diagnoseFlags struct {
	pid, projection      string
	jit, jitArgs, jitBad string
	asJSON, verbose      bool
	// The provider path.
	provider, baseURL, model string
}

func newDiagnoseCmd(e *env) *cobra.Command {
	var f diagnoseFlags
	c := &cobra.Command{
		Use:   "diagnose",
		Short: "Run the tool-protocol diagnostic: an echo round trip, and optionally a JIT tool check",
		Long: `diagnose runs the protocol diagnostic of the built-in tool-protocol-diagnostics Skill
through the model's path, exactly as a model would:

  - one echo call with a small sentinel covering strings, numbers (2^53+1 among them),
    booleans, null, lists and nested objects (with a nested "action" key, which is data);
  - whether the call reached echo (a tool_called event) or failed earlier;
  - a typed expected-versus-observed comparison of every node;
  - the size-limit status of the arguments and the result;
  - with --jit NAME, the registered JIT tool called directly (direct projection) or
    through the exact run_jit_tool envelope (multiplexed), first with a valid case and
    then with a schema-invalid case that must be rejected before execution;
  - the layers an echo round trip does not test.

Without --pid it spawns a fresh process of the default image in a throwaway store.
With --pid it diagnoses that process in the store (--data); its calls are recorded in
the process's event log like any other. Exit status 0 when every check passes, 1 when
one fails.`,
		Example: `  libos diagnose
  libos diagnose --projection multiplexed --json
  libos diagnose --data ./agent-store --pid pid_0123... --jit clock_now
  libos diagnose --pid pid_0123... --jit clock_now --jit-args '{"timezone":"UTC"}' --jit-invalid '{"timezone":5}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := diag.Options{JIT: f.jit}
			var viaProvider agent.Provider
			if f.provider != "" {
				if f.model == "" {
					return usageErr("--provider needs --model")
				}
				prov, err := agent.NewProvider(providerConfig(f.provider, f.baseURL, 2, false, 2*time.Minute))
				if err != nil {
					return usageErr("%v", err)
				}
				opts.Path = "provider:" + prov.Name()
				viaProvider = prov
			} else if f.baseURL != "" || f.model != "" {
				return usageErr("--base-url and --model need --provider")
			}
			for _, a := range []struct {
				flag, val string
				dst       *json.RawMessage
			}{{"--jit-args", f.jitArgs, &opts.JITArgs}, {"--jit-invalid", f.jitBad, &opts.JITInvalid}} {
				if a.val == "" {
					continue
				}
				if f.jit == "" {
					return usageErr("%s needs --jit NAME", a.flag)
				}
				if !json.Valid([]byte(a.val)) {
					return usageErr("%s is not JSON: %s", a.flag, a.val)
				}
				*a.dst = json.RawMessage(a.val)
			}
			runOn := func(sys *system, pid string) error {
				if viaProvider != nil {
					opts.Caller = providerCaller(sys, pid, viaProvider, f.model)
				}
				r, err := diag.Run(cmd.Context(), sys.k, pid, opts)
				if err != nil {
					return usageErr("diagnose: %v", err)
				}
				if f.asJSON {
					if err := writeJSON(e.stdout, r); err != nil {
						return usageErr("%v", err)
					}
				} else {
					printDiagnosis(e.stdout, r, f.verbose)
				}
				if !r.OK {
					return failed()
				}
				return nil
			}
			if f.pid != "" {
				if cmd.Flags().Changed("projection") {
					return usageErr("--projection applies only without --pid: a process's projection is fixed at spawn")
				}
				return withSystem(cmd.Context(), e, readWrite, func(sys *system) error { return runOn(sys, f.pid) })
			}
			if f.jit != "" {
				return usageErr("--jit needs --pid: a JIT tool is registered in one process")
			}
			proj, err := parseProjection(f.projection)
			if err != nil {
				return err
			}
			return withScratch(cmd.Context(), e, func(sys *system) error {
				pid, err := sys.spawnImage(cmd.Context(), "", proj)
				if err != nil {
					return err
				}
				return runOn(sys, pid)
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.pid, "pid", "", "diagnose this process of the store instead of a fresh one")
	fl.StringVar(&f.projection, "projection", "", "without --pid: the projection of the fresh process (default: the image's)")
	fl.StringVar(&f.jit, "jit", "", "also check this registered JIT tool")
	fl.StringVar(&f.jitArgs, "jit-args", "", "a valid case for --jit (default: the args of its first test)")
	fl.StringVar(&f.jitBad, "jit-invalid", "", "a case --jit's input schema must reject (default: the valid case plus an undeclared key)")
	fl.StringVar(&f.provider, "provider", "", "run the echo call through a real model API (openai or anthropic): the model is asked to make it")
	fl.StringVar(&f.baseURL, "base-url", "", "with --provider: the API base URL (default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)")
	fl.StringVar(&f.model, "model", "", "with --provider: the model name")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print every node of the comparison, not only the differences")
	_ = c.RegisterFlagCompletionFunc("projection", cobra.FixedCompletions([]string{"direct", "multiplexed"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printCall(w io.Writer, c diag.Call) {
	fmt.Fprintf(w, "  function    %s\n", c.Function)
	fmt.Fprintf(w, "  arguments   %s\n", c.Arguments)
	fmt.Fprintf(w, "  dispatched  %s", yesNo(c.Dispatched))
	if c.CallID != "" {
		fmt.Fprintf(w, " (tool %s, call %s)", c.Tool, c.CallID)
	}
	fmt.Fprintf(w, "\n  events      %s\n", strings.Join(c.Events, ", "))
	if c.Failure != nil {
		fmt.Fprintf(w, "  failed      %s, stage %s: %s\n", c.Failure.Code, c.Failure.Stage, c.Failure.Message)
	} else {
		fmt.Fprintf(w, "  result      %s\n", c.Result)
	}
}

func printDiagnosis(w io.Writer, r *diag.Report, verbose bool) {
	fmt.Fprintf(w, "protocol diagnostic of process %s (%s projection)\n\n", r.PID, r.Projection)
	fmt.Fprintln(w, "echo round trip")
	printCall(w, r.Echo.Call)
	bad := 0
	for _, c := range r.Echo.Comparison {
		if !c.OK {
			bad++
		}
	}
	if r.Echo.Result != nil {
		fmt.Fprintf(w, "  comparison  %d nodes compared by JSON type and value (numbers exactly, keys in any order): %d differ\n", len(r.Echo.Comparison), bad)
		for _, c := range r.Echo.Comparison {
			if c.OK && !verbose {
				continue
			}
			mark := "ok  "
			if !c.OK {
				mark = "DIFF"
			}
			fmt.Fprintf(w, "    %s %-34s expected %-7s observed %-7s %s\n", mark, c.Path, c.Expected, c.Observed, c.Note)
		}
	}
	l := r.Echo.Limits
	fmt.Fprintf(w, "  size        arguments %d of %d bytes, result %d of %d bytes; within limits: %s; truncated: %s\n",
		l.ArgumentBytes, l.MaxArgumentBytes, l.ResultBytes, l.MaxResultBytes, yesNo(l.Within), yesNo(l.Truncated))
	if j := r.JIT; j != nil {
		fmt.Fprintf(w, "\nJIT tool %s (%s projection)\n", j.Name, j.Projection)
		fmt.Fprintln(w, " valid case")
		printCall(w, j.Valid)
		fmt.Fprintln(w, " schema-invalid case")
		printCall(w, j.Invalid)
		fmt.Fprintf(w, "  rejected before execution: %s\n", yesNo(j.InvalidRejectedBeforeExecution))
	}
	fmt.Fprintln(w, "\nnot tested by this diagnostic:")
	for _, n := range r.NotTested {
		fmt.Fprintf(w, "  - %s\n", n)
	}
	if r.OK {
		fmt.Fprintln(w, "\nPASS")
	} else {
		fmt.Fprintln(w, "\nFAIL")
	}
}

// providerCaller asks a real model, through the provider path, to make the echo call
// of the protocol-diagnostics Skill, and reports the first call it made: the function
// name and arguments as the model sent them, and the kernel's answer.
func providerCaller(sys *system, pid string, prov agent.Provider, model string) diag.Caller {
	return func(ctx context.Context, fn string, args json.RawMessage) (string, json.RawMessage, *engine.Result, error) {
		k := &firstCall{Kernel: sys.k}
		prompt := "This is a transport diagnostic. Call the tool " + fn + " exactly once, with exactly this JSON object as its arguments, unchanged: " +
			string(args) + "\nWhen the result arrives, reply with the single word: done."
		_, err := agent.Run(ctx, agent.Config{Kernel: k, Log: sys.Store(), Provider: prov, Model: model, PID: pid, MaxSteps: 2}, prompt)
		if !k.seen {
			if err != nil {
				return fn, nil, nil, err
			}
			return fn, nil, nil, nil
		}
		return k.fn, k.args, k.res, k.err
	}
}

// firstCall passes frames to the kernel and keeps the first one with its answer.
type firstCall struct {
	agent.Kernel
	seen bool
	fn   string
	args json.RawMessage
	res  *engine.Result
	err  error
}

func (f *firstCall) HandleFrame(ctx context.Context, pid string, frame []byte) (*engine.Result, error) {
	res, err := f.Kernel.HandleFrame(ctx, pid, frame)
	if !f.seen {
		f.seen = true
		f.fn, f.args = frameCall(frame)
		f.res, f.err = res, err
	}
	return res, err
}

// frameCall reads the function name and arguments of a provider frame: an OpenAI tool
// call (arguments string) or an Anthropic tool_use block (input object).
func frameCall(frame []byte) (string, json.RawMessage) {
	var f struct {
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(frame, &f); err != nil {
		return "", nil
	}
	if f.Function.Name != "" {
		return f.Function.Name, json.RawMessage(f.Function.Arguments)
	}
	return f.Name, f.Input
}
