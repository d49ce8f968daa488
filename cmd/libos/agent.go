package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/agent"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
)

type agentFlags struct {
	pid, image, projection string
	provider, baseURL      string
	model                  string
	maxSteps               int
	budgetTokens           int64
	maxRetries             int
	stream                 bool
	timeout                time.Duration
	resume                 string
	resumeSet              bool
	approvals              string
	asJSON                 bool
}

func newAgentCmd(e *env) *cobra.Command {
	var f agentFlags
	c := &cobra.Command{
		Use:   "agent [PROMPT]",
		Short: "Drive a process with a model API (OpenAI-compatible or Anthropic)",
		Long: `agent runs the provider loop: it sends PROMPT (or standard input) to a model with the
process's current tools, hands every tool call the model makes to the process exactly as
the provider sent it, answers it, and repeats until the model answers without a tool
call, --max-steps is reached or --budget-tokens is used up.

Each request renders the process's projection for the provider (OpenAI function tools in
the strict subset, or Anthropic tool definitions) with the process's instructions and
Skills as the system prompt: a JIT tool registered in one step is offered in the next
(direct projection). The conversation is recorded in the process's event log, so
'libos agent --pid PID --resume' carries on after a stop from the last settled step; a
tool call whose outcome was not recorded is never sent again.

Provider: --provider openai speaks chat completions to api.openai.com or to any
OpenAI-compatible server (llama.cpp's server, vLLM, Ollama) at --base-url or
$OPENAI_BASE_URL, with $OPENAI_API_KEY; --provider anthropic speaks the Messages API with
$ANTHROPIC_API_KEY (and $ANTHROPIC_BASE_URL). Keys are read from the environment only and
are never written to the store or the log. 408, 409, 429 and 5xx answers and refused
connections are retried up to --max-retries, waiting what the provider asks (Retry-After)
or a backoff, never more than a minute nor past --timeout; past that the run stops with a
typed provider error.

Approvals: a call waiting for operator approval is asked inline ("approve? [y/N]") when
standard input is a terminal, or with --approvals inline; with --approvals operator it
waits for 'libos approve'. Ctrl-C cancels the running call and ends the run.`,
		Example: `  # a local OpenAI-compatible server (llama.cpp: llama-server -m model.gguf --port 8080 --jinja)
  libos agent --provider openai --base-url http://127.0.0.1:8080/v1 --model local \
      "Write a tool that adds two integers, register it, and add 20 and 22."

  # Anthropic, the store's process, streamed
  ANTHROPIC_API_KEY=... libos agent --pid pid_0123... --provider anthropic --model claude-sonnet-4-5 --stream "hello"

  # carry on after a stop
  libos agent --pid pid_0123... --provider openai --model gpt-4.1 --resume`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.resumeSet = cmd.Flags().Changed("resume")
			prompt := ""
			if len(args) == 1 {
				prompt = args[0]
			}
			return runAgent(cmd.Context(), e, f, prompt)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.pid, "pid", "", "drive this process of the store")
	fl.StringVar(&f.image, "image", "", "spawn a new process from this image manifest (default: the embedded image)")
	fl.StringVar(&f.projection, "projection", "", "projection of a spawned process: direct or multiplexed")
	fl.StringVar(&f.provider, "provider", "", "model API: openai (any OpenAI-compatible server) or anthropic")
	fl.StringVar(&f.baseURL, "base-url", "", "API base URL (default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)")
	fl.StringVar(&f.model, "model", "", "model name")
	fl.IntVar(&f.maxSteps, "max-steps", 32, "most model requests in this run")
	fl.Int64Var(&f.budgetTokens, "budget-tokens", 0, "stop cleanly once the run has used this many tokens (0: no bound)")
	fl.IntVar(&f.maxRetries, "max-retries", 2, "retries of a 408, 409, 429 or 5xx answer or a refused connection (Retry-After or a backoff, at most a minute each, within the timeout)")
	fl.BoolVar(&f.stream, "stream", false, "stream the model's text as it comes")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on one model request, its retries included")
	fl.StringVar(&f.resume, "resume", "", "resume run RUN of --pid (no value: its latest unfinished run)")
	fl.Lookup("resume").NoOptDefVal = "latest"
	fl.StringVar(&f.approvals, "approvals", "", "how pending approvals are answered: inline or operator (default: inline on a terminal)")
	fl.BoolVar(&f.asJSON, "json", false, "print the run's report as JSON at the end")
	_ = c.MarkFlagRequired("provider")
	_ = c.MarkFlagRequired("model")
	c.MarkFlagsMutuallyExclusive("pid", "image")
	c.MarkFlagsMutuallyExclusive("pid", "projection")
	_ = c.RegisterFlagCompletionFunc("provider", cobra.FixedCompletions(agent.Providers, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// providerConfig reads the provider settings from flags and the usual environment.
func providerConfig(kind, baseURL string, retries int, stream bool, timeout time.Duration) agent.ProviderConfig {
	cfg := agent.ProviderConfig{Kind: kind, BaseURL: baseURL, MaxRetries: retries, Stream: stream, Timeout: timeout}
	if retries == 0 {
		cfg.MaxRetries = -1
	}
	prefix := strings.ToUpper(kind)
	cfg.APIKey = os.Getenv(prefix + "_API_KEY")
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv(prefix + "_BASE_URL")
	}
	return cfg
}

func runAgent(ctx context.Context, e *env, f agentFlags, prompt string) error {
	if f.resumeSet && f.pid == "" {
		return usageErr("--resume needs --pid")
	}
	if !f.resumeSet && prompt == "" {
		if isTerminal(e.stdin) {
			return usageErr("agent needs a PROMPT (an argument or standard input)")
		}
		b, err := io.ReadAll(io.LimitReader(e.stdin, 1<<20))
		if err != nil {
			return usageErr("read the prompt: %v", err)
		}
		if prompt = strings.TrimSpace(string(b)); prompt == "" {
			return usageErr("agent needs a PROMPT (an argument or standard input)")
		}
	}
	inline := isTerminal(e.stdin)
	switch f.approvals {
	case "":
	case "inline":
		inline = true
	case "operator":
		inline = false
	default:
		return usageErr("--approvals %q: want inline or operator", f.approvals)
	}
	if f.maxSteps <= 0 || f.budgetTokens < 0 || f.maxRetries < 0 || f.timeout <= 0 {
		return usageErr("--max-steps and --timeout must be positive; --budget-tokens and --max-retries must not be negative")
	}
	proj, err := parseProjection(f.projection)
	if err != nil {
		return err
	}
	prov, err := agent.NewProvider(providerConfig(f.provider, f.baseURL, f.maxRetries, f.stream, f.timeout))
	if err != nil {
		return usageErr("%v", err)
	}
	sys, err := e.open(ctx, readWrite)
	if err != nil {
		return err
	}
	defer sys.Close()
	pid := f.pid
	if pid == "" {
		if pid, err = sys.spawnImage(ctx, f.image, proj); err != nil {
			return err
		}
		e.log.Info("spawned a process", "pid", pid, "store", sys.dir)
	} else if _, err := sys.k.Process(pid); err != nil {
		return usageErr("--pid %s: %v (list processes with 'libos ps')", pid, err)
	}

	// Ctrl-C cancels the running call (its guest stops at its next poll and the call
	// settles as cancelled) and ends the run; a second Ctrl-C is the default action.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	out := &agentPrinter{w: e.stdout}
	cfg := agent.Config{Kernel: sys.k, Log: sys.Store(), Provider: prov, Model: f.model, PID: pid,
		MaxSteps: f.maxSteps, BudgetTokens: f.budgetTokens, Observer: out.observer()}
	if inline {
		done := make(chan struct{})
		defer close(done)
		go answerApprovals(ctx, done, sys.k, pid, e.stdin, out)
	}
	var rep *agent.Report
	if f.resumeSet {
		run := f.resume
		if run == "latest" {
			run = ""
		}
		rep, err = agent.Resume(ctx, cfg, run)
	} else {
		rep, err = agent.Run(ctx, cfg, prompt)
	}
	out.endText()
	if rep != nil {
		if f.asJSON {
			_ = writeJSON(e.stdout, rep)
		} else {
			fmt.Fprintf(e.stdout, "[%s] run %s of %s: %d steps, %d tool calls, tokens %d in / %d out\n",
				rep.Reason, rep.RunID, pid, rep.Steps, rep.Calls, rep.Usage.Input, rep.Usage.Output)
		}
	}
	if err != nil {
		e.log.Error("agent: the run stopped", "code", string(liberr.CodeOf(err)), "err", err)
		return failed()
	}
	return nil
}

// agentPrinter shows a run in a terminal: streamed text, one line per tool call.
type agentPrinter struct {
	mu     sync.Mutex
	w      io.Writer
	inText bool
}

func (p *agentPrinter) endText() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
}

func (p *agentPrinter) line(format string, args ...any) {
	p.endText()
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *agentPrinter) observer() agent.Observer {
	return agent.Observer{
		Text: func(s string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			fmt.Fprint(p.w, sanitizeTerminal(s))
			p.inText = true
		},
		ToolDone: func(step int, o agent.Outcome) {
			status := "ok"
			if o.Code != "" {
				status = o.Code
			}
			p.line("  [tool] %s → %s %s", sanitizeTerminal(liberr.Clip(o.Call.Name, 64)), status, sanitizeTerminal(liberr.Clip(o.Text, 160)))
		},
	}
}

// answerApprovals asks on the terminal about each approval the process waits for.
func answerApprovals(ctx context.Context, done <-chan struct{}, k *engine.Kernel, pid string, in io.Reader, out *agentPrinter) {
	asked := map[string]bool{}
	lines := bufio.NewScanner(in)
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
		}
		pending, err := k.Approvals(pid)
		if err != nil {
			continue
		}
		for _, a := range pending {
			if a.State != engine.ApprovalPending || asked[a.ID] {
				continue
			}
			asked[a.ID] = true
			args := string(a.Args)
			if len(args) > 200 {
				args = "sha256:" + a.ArgsSHA256
			}
			out.line("  [approval] %s wants %s %s (definition %s) — approve? [y/N]",
				a.ID, sanitizeTerminal(a.Tool), sanitizeTerminal(args), liberr.Clip(a.DefinitionSHA256, 12))
			if !lines.Scan() {
				return
			}
			if ans := strings.TrimSpace(strings.ToLower(lines.Text())); ans == "y" || ans == "yes" {
				err = k.Approve(ctx, a.ID)
			} else {
				err = k.Deny(ctx, a.ID, "denied at the terminal")
			}
			if err != nil {
				out.line("  [approval] %s: %v", a.ID, err)
			}
		}
	}
}

// sanitizeTerminal replaces control characters (escape sequences among them) so that
// text from a model or a tool cannot drive the terminal.
func sanitizeTerminal(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '�'
		}
		return r
	}, s)
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
