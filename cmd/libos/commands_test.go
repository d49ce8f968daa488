package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentlibos/libos/cmd/libos/internal/diag"
	"github.com/agentlibos/libos/syscalls"
)

// TestDemo: "libos demo — what make run runs" exits 0 and walks the whole pipeline,
// and "the demo ends with: a real call of the clock tool, its exported tape printed,
// and a replay that says same".
func TestDemo(t *testing.T) {
	r := libos(t, "", "demo")
	if r.code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Egress: "A JIT tool, authored through propose/validate/register in the demo, that
	// fetches JSON from an allow-listed loopback server with a secret header and
	// returns a summary; the same tool refused when the image drops the host; the audit
	// log showing each decision."
	for _, want := range []string{"propose_jit_tool", "run_jit_tool", "capability_denied", "schema_invalid", "all three logs verify", "libos serve", "demo complete", `"syscalls": [`, "clock_now: same",
		`"stars":60`, "error host_not_allowed", "allowed at done: GET 127.0.0.1:", "denied at policy (host_not_allowed): GET", "secrets sent: DEMO_TOKEN"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the demo never shows %q", want)
		}
	}
	// The demo runs the protocol-diagnostics workflow end to end under the default
	// image ("echo, then the real target tool, then a registered JIT tool") and shows a
	// refused big number and a refused Date.now().
	for _, want := range []string{"The protocol-diagnostics Skill's workflow", "no tool is taken away", "step 4, the real target tool",
		"number_inexact", "ambient_clock"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the demo's diagnostics workflow never shows %q", want)
		}
	}
	last := r.stdout[strings.LastIndex(r.stdout, "\n== "):]
	if !strings.Contains(last, `"name":"clock_now"`) || !strings.Contains(last, `"syscalls": [`) || !strings.Contains(last, "clock_now: same") {
		t.Errorf("the demo's last section is not a clock call, its tape and a replay that says same:\n%s", last)
	}
}

// TestDiagnoseDefaultImage: "libos diagnose passes on the default image", in both
// projections, with every item of the Skill's completion evidence in the report.
func TestDiagnoseDefaultImage(t *testing.T) {
	for _, proj := range []string{"direct", "multiplexed"} {
		t.Run(proj, func(t *testing.T) {
			r := libos(t, "", "diagnose", "--json", "--projection", proj)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			var rep diag.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			e := rep.Echo
			switch {
			case !rep.OK || rep.Projection != proj:
				t.Errorf("ok=%v projection=%s", rep.OK, rep.Projection)
			case e.Function != "echo" || !strings.Contains(string(e.Arguments), "9007199254740993") || strings.Contains(string(e.Arguments), `{"action"`):
				t.Errorf("the exact function and object: %s %s", e.Function, e.Arguments)
			case !e.Dispatched || e.CallID == "" || strings.Join(e.Events, ",") != "tool_called,tool_result":
				t.Errorf("whether the call reached echo: %+v", e.Call)
			case !e.Match || len(e.Comparison) < 20:
				t.Errorf("a semantic expected-versus-observed comparison: %+v", e.Comparison)
			case !e.Limits.Within || e.Limits.Truncated || e.Limits.MaxArgumentBytes == 0:
				t.Errorf("size-limit status: %+v", e.Limits)
			case len(rep.NotTested) == 0:
				t.Errorf("the remaining layers not tested by Echo are missing")
			}
			text := libos(t, "", "diagnose", "--projection", proj)
			if text.code != 0 || !strings.Contains(text.stdout, "dispatched  yes") || !strings.HasSuffix(text.stdout, "PASS\n") {
				t.Errorf("human report: %d\n%s", text.code, text.stdout)
			}
		})
	}
}

// TestDiagnoseJIT: "with --jit NAME also the direct call or exact run_jit_tool
// envelope, a valid case and a schema-invalid case that must be rejected before
// execution" — against processes of a store that registered the clock tool.
func TestDiagnoseJIT(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	demoStore(t, data)
	ps := libos(t, "", "ps", "--json", "--data", data)
	var procs []struct {
		PID          string   `json:"pid"`
		Projection   string   `json:"projection"`
		Capabilities []string `json:"capabilities"`
	}
	if err := json.Unmarshal([]byte(ps.stdout), &procs); err != nil {
		t.Fatalf("ps: %v\n%s", err, ps.stdout)
	}
	// The demo's other processes (egress, the Skills workflow) registered other tools:
	// the check applies to the three that registered clock_now.
	diagnosed := 0
	for _, p := range procs {
		probe := libos(t, "", "diagnose", "--json", "--data", data, "--pid", p.PID, "--jit", "clock_now")
		if probe.code == 2 && strings.Contains(probe.stderr, "no registered JIT tool") {
			continue
		}
		diagnosed++
		denied := len(p.Capabilities) == 1 // the demo's process without clock:now
		t.Run(p.Projection+map[bool]string{true: "/denied"}[denied], func(t *testing.T) {
			r := libos(t, "", "diagnose", "--json", "--data", data, "--pid", p.PID, "--jit", "clock_now")
			var rep diag.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.JIT == nil {
				t.Fatalf("exit %d: %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
			}
			j := rep.JIT
			wantFn := map[string]string{"direct": "clock_now", "multiplexed": "run_jit_tool"}[p.Projection]
			if j.Valid.Function != wantFn || j.Invalid.Function != wantFn {
				t.Errorf("function %s/%s, want %s", j.Valid.Function, j.Invalid.Function, wantFn)
			}
			if p.Projection == "multiplexed" && !strings.HasPrefix(compact(j.Valid.Arguments), `{"tool_name":"clock_now","arguments":{`) {
				t.Errorf("not the exact envelope: %s", j.Valid.Arguments)
			}
			if !j.InvalidRejectedBeforeExecution || j.Invalid.Dispatched {
				t.Errorf("the invalid case was not rejected before execution: %+v", j.Invalid)
			}
			if denied {
				// The valid case runs, and the syscall is refused: the check fails.
				if r.code != 1 || j.OK || j.Valid.Failure == nil || j.Valid.Failure.Code != "capability_denied" {
					t.Errorf("denied process: exit %d, valid case %+v", r.code, j.Valid)
				}
				return
			}
			if r.code != 0 || !j.OK || j.Valid.Failure != nil || !strings.Contains(compact(j.Valid.Result), `"timezone":"UTC"`) {
				t.Errorf("exit %d, valid case %+v", r.code, j.Valid)
			}
		})
	}
	if diagnosed != 3 {
		t.Errorf("%d processes of the demo registered clock_now, want 3\n%s", diagnosed, ps.stdout)
	}
}

// TestInspectCommands: tools, syscalls, ps, events --verify and call on a store.
func TestInspectCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	// The projected list as MCP, OpenAI and Anthropic JSON.
	for format, key := range map[string]string{"mcp": `"inputSchema"`, "openai": `"parameters"`, "anthropic": `"input_schema"`} {
		r := libos(t, "", "tools", "--format", format)
		if r.code != 0 || !strings.Contains(r.stdout, key) || !json.Valid([]byte(r.stdout)) {
			t.Errorf("tools --format %s: %d\n%s", format, r.code, r.stdout)
		}
	}
	if r := libos(t, "", "tools", "--projection", "multiplexed"); !strings.Contains(r.stdout, `"run_jit_tool"`) {
		t.Errorf("multiplexed list without run_jit_tool:\n%s", r.stdout)
	}
	if r := libos(t, "", "tools", "--format", "xml"); r.code != 2 {
		t.Errorf("an unknown format: exit %d", r.code)
	}

	// The route table.
	r := libos(t, "", "syscalls")
	if r.code != 0 || !regexp.MustCompile(`(?m)^clock\.now\s+clock:now\s`).MatchString(r.stdout) {
		t.Errorf("syscalls:\n%s", r.stdout)
	}
	// Each route's policy slots, as the table declares them, with where the image
	// manifest holds each.
	for _, want := range syscalls.Routes() {
		slots := make([]string, len(want.Policy))
		for i, s := range want.Policy {
			slots[i] = string(s)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want.Name) + `\s.*\s` + regexp.QuoteMeta(strings.Join(slots, ",")) + `\s`).MatchString(r.stdout) {
			t.Errorf("syscalls does not show the slots %v of %s:\n%s", slots, want.Name, r.stdout)
		}
	}
	r = libos(t, "", "syscalls", "--json")
	var routes []struct {
		Name       string          `json:"name"`
		ArgsSchema json.RawMessage `json:"args_schema"`
		Policy     []struct{ Slot, Field string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &routes); err != nil || len(routes) != len(syscalls.Routes()) {
		t.Errorf("syscalls --json: %v\n%s", err, r.stdout)
	}
	for i, want := range syscalls.Routes() {
		if i < len(routes) && (routes[i].Name != want.Name || len(routes[i].ArgsSchema) == 0 || len(routes[i].Policy) != len(want.Policy)) {
			t.Errorf("syscalls --json lists %q at %d; the route table has %q", routes[i].Name, i, want.Name)
			continue
		}
		for j, s := range want.Policy {
			if got := routes[i].Policy[j]; got.Slot != string(s) || got.Field != s.FieldName() {
				t.Errorf("syscalls --json: %s slot %d is %+v, want %s at %s", want.Name, j, got, s, s.FieldName())
			}
		}
	}

	// A process, a call, its events.
	pid := demoStore(t, data)
	r = libos(t, "", "call", pid, "echo", `{"n":9007199254740993}`, "--data", data)
	if r.code != 0 || r.stdout != "{\"n\":9007199254740993}\n" {
		t.Errorf("call echo: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = libos(t, "", "call", pid, "clock_now", `{"timezone":1}`, "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, "schema_invalid") {
		t.Errorf("call with invalid arguments: %d %s", r.code, r.stderr)
	}
	r = libos(t, `{"type":"function","function":{"name":"echo","arguments":"{\"a\":1}"}}`, "call", pid, "--frame", "-", "--data", data)
	if r.code != 0 || r.stdout != "{\"a\":1}\n" {
		t.Errorf("call --frame: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Protocol-diagnostics seed: for a frame that fails before echo runs, "use
	// provider/repair/audit evidence": the operator reads the rejected frame itself.
	r = libos(t, `{"name":"echo","arguments":"[\"REPAIR-ME\"]"}`, "call", pid, "--frame", "-", "--data", data)
	if r.code == 0 || !strings.Contains(r.stderr, "protocol_frame") || strings.Contains(r.stderr, "REPAIR-ME") {
		t.Errorf("call --frame with array arguments: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = libos(t, "", "events", pid, "--rejected", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, `REPAIR-ME`) || !strings.Contains(r.stdout, "protocol_frame") ||
		!strings.Contains(r.stdout, "sha256 ") || strings.Contains(r.stdout, "tool_called") {
		t.Errorf("events --rejected: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = libos(t, "", "events", pid, "--verify", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "tool_called") || !strings.Contains(r.stdout, "call_rejected") || !strings.Contains(r.stderr, "hash chain intact") {
		t.Errorf("events --verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = libos(t, "", "candidates", pid, "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "clock_now") || !strings.Contains(r.stdout, "registered") {
		t.Errorf("candidates: %d\n%s", r.code, r.stdout)
	}
	r = libos(t, "", "events", "pid_nope", "--data", data)
	if r.code != 2 || !strings.Contains(r.stderr, "libos ps") {
		t.Errorf("events of an unknown process: %d %s", r.code, r.stderr)
	}
}

// TestVersionAndHelp: "--version prints the version and the QuickJS and wazero
// versions"; every command has help and examples; shell completion exists.
func TestVersionAndHelp(t *testing.T) {
	r := libos(t, "", "--version")
	if r.code != 0 || !strings.Contains(r.stdout, "QuickJS 2021-03-27") || !regexp.MustCompile(`wazero v\d+\.\d+\.\d+`).MatchString(r.stdout) {
		t.Errorf("--version:\n%s", r.stdout)
	}
	for _, c := range []string{"serve", "validate", "diagnose", "demo", "call", "tools", "syscalls", "ps", "events", "candidates", "version", "cache warm"} {
		r := libos(t, "", append(strings.Fields(c), "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("%s --help has no examples (exit %d)", c, r.code)
		}
	}
	if r := libos(t, "", "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "__start_libos") {
		t.Errorf("completion bash: %d", r.code)
	}
	if r := libos(t, "", "nonsense"); r.code != 2 {
		t.Errorf("unknown command: exit %d", r.code)
	}
}

// TestVersionCommand: "libos version prints them [the guest's sha256, the QuickJS
// release, the clang/wasi-libc versions and the patch digest] with the module version
// (from debug.ReadBuildInfo), Go version and platform." The sha256 printed is the one
// of the committed guest file.
func TestVersionCommand(t *testing.T) {
	guest, err := os.ReadFile(filepath.Join("..", "..", "wasm", "libos_guest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(guest)
	r := libos(t, "", "version")
	for _, want := range []string{
		"guest sha256 " + hex.EncodeToString(sum[:]), "QuickJS 2021-03-27", "patch sha256 ", "clang version ", "wasi-libc ",
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("libos version (exit %d) lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^libos \S+$`).MatchString(r.stdout) || !regexp.MustCompile(`wazero v\d+\.\d+\.\d+`).MatchString(r.stdout) {
		t.Errorf("libos version names no module or wazero version:\n%s", r.stdout)
	}
	r = libos(t, "", "version", "--json")
	var v struct {
		Module string `json:"module"`
		Guest  struct {
			SHA256 string `json:"sha256"`
		} `json:"guest"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Module == "" || v.Guest.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("libos version --json: %v\n%s", err, r.stdout)
	}
}

// TestCacheWarm: "libos cache warm / --cache-dir so a CI cache step can keep the
// compiled guest": warm fills the directory, validate uses it, and a directory that
// cannot hold a cache is a usage error for warm (exit 2) and only a warning for the
// commands that can compile in memory.
func TestCacheWarm(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	if r := libos(t, "", "cache", "warm", "--cache-dir", cache); r.code != 0 || !strings.Contains(r.stdout, cache) {
		t.Fatalf("cache warm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ents, err := os.ReadDir(cache)
	if err != nil || len(ents) == 0 {
		t.Fatalf("cache warm left %s empty (%v)", cache, err)
	}
	cand := filepath.Join("..", "..", "testdata", "candidates", "good_sum_exact.json")
	if r := libos(t, "", "validate", "--cache-dir", cache, cand); r.code != 0 {
		t.Fatalf("validate --cache-dir: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := libos(t, "", "cache", "warm", "--cache-dir", file); r.code != 2 || !strings.Contains(r.stderr, "compilation cache") {
		t.Errorf("cache warm on a file: exit %d\n%s", r.code, r.stderr)
	}
	if r := libos(t, "", "validate", "--cache-dir", file, cand); r.code != 0 || !strings.Contains(r.stderr, "compiling in memory") {
		t.Errorf("validate with an unusable cache: exit %d\n%s", r.code, r.stderr)
	}
}

func compact(b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}
