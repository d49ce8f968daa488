package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/cmd/libos/internal/diag"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/tools"
)

func newDemoCmd(e *env) *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "A scripted, model-free session through the real pipeline (what 'make run' runs)",
		Long: `demo plays a short session on a fresh temporary store, with no model: every step is a
real tool call through the libOS's adapter, projection and pipeline, and every step's
outcome is checked. It shows:

  1. spawning a process from the default image and its tool list;
  2. the echo protocol diagnostic;
  3. proposing, validating and registering a JIT tool (the clock tool of the
     jit-authoring Skill), and calling it in the direct projection;
  4. the protocol-diagnostics Skill's workflow with the Skill active (echo, the
     target tool, a JIT tool), a refused big number and a refused Date.now();
  5. the same tool in the multiplexed projection, through run_jit_tool;
  6. a schema-invalid call rejected before execution, and a denied capability;
  7. governed egress: a JIT tool fetching JSON from an allow-listed loopback server
     with a secret header it never sees, the same tool refused when the image drops
     the host, and the audit log of each decision;
  8. the audit log, verified;
  9. how to start 'libos serve' and connect a client;

and ends with a real call of the clock tool, its tape exported from the call's syscall
journal, and a replay of the tool's code against it that says "same". Exit status 0 when
every step behaved as shown.`,
		Example: `  libos demo
  make run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "libos-demo-")
			if err != nil {
				return usageErr("temporary store: %v", err)
			}
			if keep {
				fmt.Fprintf(e.stdout, "(the store stays in %s)\n", dir)
			} else {
				defer os.RemoveAll(dir)
			}
			sys, err := openSystem(cmd.Context(), dir, e, readWrite)
			if err != nil {
				return err
			}
			d := &demo{ctx: cmd.Context(), w: e.stdout, sys: sys, dir: dir}
			derr := d.run()
			if cerr := sys.Close(); cerr != nil && derr == nil {
				derr = cerr
			}
			if derr != nil {
				fmt.Fprintf(e.stdout, "\nthe demo stopped: %v\n", derr)
				return failed()
			}
			return nil
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the temporary store for inspection ('libos ps --data DIR')")
	return c
}

type demo struct {
	ctx  context.Context
	w    io.Writer
	sys  *system
	dir  string
	step int
	// quiet suppresses the frame lines (when the same calls were shown already).
	quiet bool
}

// clockCandidate is the clock tool of the jit-authoring Skill, as a model proposes it.
const clockCandidate = `{
  "name": "clock_now",
  "description": "Return the current time in a named IANA time zone.",
  "source_code": "export async function run(args: { timezone: string }, libos: any) {\n  const observed = await libos.syscall(\"clock.now\", {timezone: args.timezone});\n  return {iso8601: String(observed.iso8601), timezone: String(observed.timezone)};\n}\n",
  "input_schema": {"type":"object","properties":{"timezone":{"type":"string","maxLength":64}},"required":["timezone"],"additionalProperties":false},
  "output_schema": {"type":"object","properties":{"iso8601":{"type":"string","maxLength":64},"timezone":{"type":"string","maxLength":64}},"required":["iso8601","timezone"],"additionalProperties":false},
  "tests": [{
    "args": {"timezone":"UTC"},
    "expected": {"iso8601":"2026-01-02T03:04:05+00:00","timezone":"UTC"},
    "syscalls": [{"name":"clock.now","args":{"timezone":"UTC"},"result":{"iso8601":"2026-01-02T03:04:05+00:00","unix_seconds":1767323045,"timezone":"UTC"}}]
  }]
}`

func (d *demo) title(s string) {
	d.step++
	fmt.Fprintf(d.w, "\n== %d. %s\n", d.step, s)
}

func (d *demo) say(format string, args ...any) {
	if d.quiet && strings.HasPrefix(format, "model") || d.quiet && strings.HasPrefix(format, "libos") {
		return
	}
	fmt.Fprintf(d.w, "   "+format+"\n", args...)
}

// call sends one frame as the model would and prints it with its outcome.
func (d *demo) call(pid, frame string) (*engine.Result, error) {
	d.say("model  → %s", frame)
	res, err := d.sys.k.HandleFrame(d.ctx, pid, []byte(frame))
	if err != nil {
		msg := err.Error()
		var ee *engine.Error
		if errors.As(err, &ee) {
			msg = ee.Message
		}
		d.say("libos  ← error %s: %s", liberr.CodeOr(err, liberr.CodeToolFailed), msg)
		return nil, err
	}
	d.say("libos  ← %s", res.Text)
	return res, nil
}

// expectOK and expectCode turn an outcome that differs from the script into an error.
func expectOK(res *engine.Result, err error) (*engine.Result, error) {
	if err != nil {
		return nil, fmt.Errorf("expected a result, got %w", err)
	}
	return res, nil
}

func expectCode(want string, err error) error {
	if err == nil {
		return fmt.Errorf("expected error %s, got a result", want)
	}
	if got := string(liberr.CodeOr(err, liberr.CodeToolFailed)); got != want {
		return fmt.Errorf("expected error %s, got %s: %w", want, got, err)
	}
	return nil
}

func field(res *engine.Result, name string) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(res.Structured, &m)
	var s string
	_ = json.Unmarshal(m[name], &s)
	return s
}

func (d *demo) toolNames(pid string) string {
	defs, _ := d.sys.k.Tools(pid)
	var names []string
	for _, t := range defs {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// authorClock proposes, validates and registers the clock tool in pid; show prints
// the frames.
func (d *demo) authorClock(pid string, show bool) error {
	return d.author(pid, clockCandidate, "clock_now", show)
}

// author proposes, validates and registers candidate (named name) in pid; show prints
// the frames.
func (d *demo) author(pid, candidate, name string, show bool) error {
	if !show {
		d.say("propose_jit_tool, validate_jit_tool, register_jit_tool: the same candidate as above")
		d.quiet = true
		defer func() { d.quiet = false }()
	}
	compact := strings.Join(strings.Fields(candidate), " ")
	res, err := expectOK(d.call(pid, `{"name":"propose_jit_tool","arguments":`+compact+`}`))
	if err != nil {
		return err
	}
	cid := field(res, "candidate_id")
	res, err = expectOK(d.call(pid, `{"name":"validate_jit_tool","arguments":{"candidate_id":"`+cid+`"}}`))
	if err != nil {
		return err
	}
	if !strings.Contains(res.Text, `"ok":true`) {
		return fmt.Errorf("%s did not validate: %s", name, res.Text)
	}
	res, err = expectOK(d.call(pid, `{"name":"register_jit_tool","arguments":{"candidate_id":"`+cid+`"}}`))
	if err != nil {
		return err
	}
	if field(res, "name") != name || field(res, "scope") != "ephemeral_process" {
		return fmt.Errorf("unexpected registration %s", res.Text)
	}
	return nil
}

func (d *demo) run() error {
	k := d.sys.k
	fmt.Fprintf(d.w, "Agent libOS demo: a scripted session with no model, on a fresh store in %s.\n", d.dir)
	fmt.Fprintln(d.w, "Every line marked 'model →' is a tool call frame going through the real pipeline.")

	d.title("Spawn a process from the default image (direct projection)")
	img, err := loadImage("", engine.Direct)
	if err != nil {
		return err
	}
	pid, err := k.SpawnImage(d.ctx, img)
	if err != nil {
		return err
	}
	info, _ := k.Process(pid)
	d.say("pid %s, capabilities %s", pid, strings.Join(info.Capabilities, ", "))
	d.say("the model sees: %s", d.toolNames(pid))
	changed := make(chan string, 8)
	unsub := k.OnToolsChanged(func(p string) { changed <- p })
	defer unsub()

	d.title("Protocol diagnostic: an echo round trip")
	d.say("an OpenAI-style frame, arguments as a JSON string; the top-level action is reserved and removed:")
	res, err := expectOK(d.call(pid, `{"type":"function","function":{"name":" echo ","arguments":"{\"action\":\"x\",\"n\":9007199254740993,\"nested\":{\"action\":\"kept\"}}"}}`))
	if err != nil {
		return err
	}
	if res.Text != `{"n":9007199254740993,"nested":{"action":"kept"}}` {
		return fmt.Errorf("echo returned %s", res.Text)
	}
	d.say("malformed arguments never reach a tool: they are protocol-frame failures")
	if err := expectCode("protocol_frame", second(d.call(pid, `{"name":"echo","arguments":"[1,2,3]"}`))); err != nil {
		return err
	}
	r, err := diag.Run(d.ctx, k, pid, diag.Options{})
	if err != nil {
		return err
	}
	d.say("the full diagnostic ('libos diagnose'): dispatched=%v, %d nodes compared, match=%v, within limits=%v",
		r.Echo.Dispatched, len(r.Echo.Comparison), r.Echo.Match, r.Echo.Limits.Within)
	if !r.OK {
		return fmt.Errorf("the echo diagnostic failed")
	}

	d.title("Author a JIT tool: propose, validate (tests run in the sandbox on a syscall tape), register")
	if err := d.authorClock(pid, true); err != nil {
		return err
	}
	select {
	case p := <-changed:
		d.say("tools changed in %s (an MCP client gets notifications/tools/list_changed)", p)
	case <-time.After(notifyWait):
		return fmt.Errorf("no tools-changed notification after registration")
	}
	d.say("the model now sees: %s", d.toolNames(pid))

	d.title("Call the JIT tool by its own name (direct projection), Anthropic-style frame, real clock")
	if _, err := expectOK(d.call(pid, `{"type":"tool_use","id":"toolu_1","name":"clock_now","input":{"timezone":"Europe/Paris"}}`)); err != nil {
		return err
	}
	d.say("a schema-invalid call is rejected before the sandbox starts:")
	if err := expectCode("schema_invalid", second(d.call(pid, `{"name":"clock_now","arguments":{"timezone":"UTC","extra":1}}`))); err != nil {
		return err
	}

	if err := d.diagnosticsWorkflow(pid, changed); err != nil {
		return err
	}

	d.title("The multiplexed projection: JIT tools hide behind run_jit_tool")
	mimg, _ := loadImage("", engine.Multiplexed)
	mpid, err := k.SpawnImage(d.ctx, mimg)
	if err != nil {
		return err
	}
	d.say("pid %s", mpid)
	if err := d.authorClock(mpid, false); err != nil {
		return err
	}
	if err := waitChanged(changed); err != nil {
		return err
	}
	names := d.toolNames(mpid)
	if strings.Contains(", "+names+",", " clock_now,") {
		return fmt.Errorf("the multiplexed projection lists clock_now: %s", names)
	}
	d.say("the model sees: %s (no clock_now)", names)
	if _, err := expectOK(d.call(mpid, `{"name":"run_jit_tool","arguments":{"tool_name":"clock_now","arguments":{"timezone":"Asia/Tokyo"}}}`)); err != nil {
		return err
	}
	d.say("the JIT name called directly is unknown in this mode:")
	if err := expectCode("unknown_tool", second(d.call(mpid, `{"name":"clock_now","arguments":{"timezone":"UTC"}}`))); err != nil {
		return err
	}

	d.title("A denied capability: the same tool in a process without clock:now")
	nimg, _ := loadImage("", engine.Direct)
	nimg.Capabilities = []string{"kv:read"}
	npid, err := k.SpawnImage(d.ctx, nimg)
	if err != nil {
		return err
	}
	d.say("pid %s, capabilities %s; registering a tool grants no capability", npid, strings.Join(nimg.Capabilities, ", "))
	if err := d.authorClock(npid, false); err != nil {
		return err
	}
	if err := waitChanged(changed); err != nil {
		return err
	}
	if err := expectCode("capability_denied", second(d.call(npid, `{"name":"clock_now","arguments":{"timezone":"UTC"}}`))); err != nil {
		return err
	}

	if err := d.egress(); err != nil {
		return err
	}

	d.title("The audit log: every call, rejection and decision, hash-chained")
	evs, err := d.sys.Events(pid, 0, 1000)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	var order []string
	for _, ev := range evs {
		if counts[ev.Type] == 0 {
			order = append(order, ev.Type)
		}
		counts[ev.Type]++
	}
	var parts []string
	for _, t := range order {
		parts = append(parts, fmt.Sprintf("%s×%d", t, counts[t]))
	}
	d.say("%s: %d events: %s", pid, len(evs), strings.Join(parts, ", "))
	for _, p := range []string{pid, mpid, npid} {
		if err := d.sys.VerifyLog(p); err != nil {
			return fmt.Errorf("the log of %s does not verify: %w", p, err)
		}
	}
	d.say("all three logs verify: no event was edited, removed, inserted or reordered")

	fmt.Fprintf(d.w, "\n== Next\n")
	d.say("serve a process to an MCP client over stdio:      libos serve")
	d.say("or over streamable HTTP:                           libos serve --http 127.0.0.1:8765")
	d.say(`client configuration: {"mcpServers":{"libos":{"command":"libos","args":["serve"]}}}`)
	d.say("check tool candidates in CI:                       libos validate candidates/")
	d.say("inspect a store:                                   libos ps, libos events PID --verify")
	d.say("turn a stored call into a test, replay it:         libos tape PID CALL_ID, libos replay PID --all")

	if err := d.tapeAndReplay(pid); err != nil {
		return err
	}
	fmt.Fprintln(d.w, "\ndemo complete: every step behaved as shown.")
	return nil
}

// tapeAndReplay ends the demo: a real call of the clock tool, exported from its
// journal as a test case, and replayed against it.
func (d *demo) tapeAndReplay(pid string) error {
	d.title("Turn a real call into a test: call the clock tool, export its tape, replay it")
	res, err := expectOK(d.call(pid, `{"name":"clock_now","arguments":{"timezone":"America/New_York"}}`))
	if err != nil {
		return err
	}
	d.say("call %s; its exported tape ('libos tape %s %s'):", res.CallID, pid, res.CallID)
	tc, err := d.sys.Tape(pid, res.CallID)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(tc, "    ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "    %s\n", b)
	r, err := d.sys.Replay(d.ctx, pid, res.CallID, tools.ReplayOptions{})
	if err != nil {
		return err
	}
	d.say("replayed against its journal, no provider touched ('libos replay %s %s'):", pid, res.CallID)
	d.say("%s", r.Text())
	if r.Verdict != tools.VerdictSame {
		return fmt.Errorf("the replay of %s is %s", res.CallID, r.Verdict)
	}
	return nil
}

func second(_ *engine.Result, err error) error { return err }

// notifyWait bounds the wait for a tools-changed notification: registration sends it
// before it returns, so a missing one is a failure, not a slow machine.
const notifyWait = 10 * time.Second

func waitChanged(changed <-chan string) error {
	select {
	case <-changed:
		return nil
	case <-time.After(notifyWait):
		return fmt.Errorf("no tools-changed notification after registration")
	}
}

// sameCandidate returns its argument: the registered JIT tool of the diagnostics step.
const sameCandidate = `{
  "name": "same_value",
  "description": "Return the value it is given.",
  "source_code": "export function run(args: { value: unknown }) {\n  return { value: args.value };\n}\n",
  "input_schema": {"type":"object","properties":{"value":{"type":["string","number","boolean","null"]}},"required":["value"],"additionalProperties":false},
  "output_schema": {"type":"object","properties":{"value":{"type":["string","number","boolean","null"]}},"required":["value"],"additionalProperties":false},
  "tests": [{"args": {"value": "x"}, "expected": {"value": "x"}, "syscalls": []}]
}`

// wallClockCandidate reads the time through Date instead of clock.now.
const wallClockCandidate = `{
  "name": "wall_clock",
  "description": "Return the time as Date sees it.",
  "source_code": "export function run(args: {}) {\n  return { ms: Date.now() };\n}\n",
  "input_schema": {"type":"object","properties":{},"required":[],"additionalProperties":false},
  "output_schema": {"type":"object","properties":{"ms":{"type":"number"}},"required":["ms"],"additionalProperties":false},
  "tests": [{"args": {}, "expected": {"ms": 0}, "syscalls": []}]
}`

// diagnosticsWorkflow runs the protocol-diagnostics Skill's workflow with that Skill
// active under the default image: echo, then the real target tools (the JIT lifecycle),
// then the registered JIT tool with a valid and a schema-invalid case. Activating a
// Skill takes no tool away. It also shows the two refusals at the sandbox's edge: a
// number a double cannot hold, and Date.now().
func (d *demo) diagnosticsWorkflow(pid string, changed <-chan string) error {
	d.title("The protocol-diagnostics Skill's workflow, with the Skill active: echo, the target tool, a JIT tool")
	res, err := expectOK(d.call(pid, `{"name":"activate_skill","arguments":{"name":"protocol-diagnostics"}}`))
	if err != nil {
		return err
	}
	if !strings.Contains(res.Text, `"allowed_tools":["echo"]`) {
		return fmt.Errorf("activation returned %s", res.Text)
	}
	d.say("its allowed-tools name what its workflow uses; no tool is taken away: %s", d.toolNames(pid))
	if _, err := expectOK(d.call(pid, `{"name":"echo","arguments":{"n":9007199254740993,"list":[true,null]}}`)); err != nil {
		return err
	}
	d.say("step 4, the real target tool: the JIT lifecycle registers a tool")
	if err := d.author(pid, sameCandidate, "same_value", false); err != nil {
		return err
	}
	if err := waitChanged(changed); err != nil {
		return err
	}
	if _, err := expectOK(d.call(pid, `{"name":"same_value","arguments":{"value":"ok"}}`)); err != nil {
		return err
	}
	if err := expectCode("schema_invalid", second(d.call(pid, `{"name":"same_value","arguments":{"value":[1]}}`))); err != nil {
		return err
	}
	d.say("a number a JIT tool's double cannot hold is refused before the tool runs, never rounded:")
	if err := expectCode("number_inexact", second(d.call(pid, `{"name":"same_value","arguments":{"value":9007199254740993}}`))); err != nil {
		return err
	}
	d.say("a tool that reads Date.now() fails validation: the sandbox has no ambient clock")
	compact := strings.Join(strings.Fields(wallClockCandidate), " ")
	res, err = expectOK(d.call(pid, `{"name":"propose_jit_tool","arguments":`+compact+`}`))
	if err != nil {
		return err
	}
	res, err = expectOK(d.call(pid, `{"name":"validate_jit_tool","arguments":{"candidate_id":"`+field(res, "candidate_id")+`"}}`))
	if err != nil {
		return err
	}
	if !strings.Contains(res.Text, `"ok":false`) || !strings.Contains(res.Text, `"code":"ambient_clock"`) {
		return fmt.Errorf("Date.now() was not refused: %s", res.Text)
	}
	if _, err := expectOK(d.call(pid, `{"name":"deactivate_skill","arguments":{"name":"protocol-diagnostics"}}`)); err != nil {
		return err
	}
	return nil
}
