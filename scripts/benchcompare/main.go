package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/wasm"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.libos, "libos", "bin/libos", "the libos binary")
	flag.StringVar(&cfg.deno, "deno", "build/tools/deno/node_modules/deno/deno", "the deno binary")
	flag.StringVar(&cfg.native, "native", "build/native/qjs-bench", "the native QuickJS benchmark binary (make native); skipped when missing")
	flag.IntVar(&cfg.reps, "reps", 21, "repetitions of each whole-process row (each side, interleaved)")
	flag.IntVar(&cfg.inproc, "inproc", 200, "repetitions of each in-process row")
	flag.IntVar(&cfg.calls, "calls", 2000, "calls of the concurrency-16 row (each side)")
	flag.StringVar(&cfg.out, "out", "BENCHMARKS.md", "where to write the table (empty: stdout only)")
	flag.StringVar(&cfg.command, "command", "make bench-compare", "the command named in the output")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

type config struct {
	libos, deno, native string
	reps, inproc, calls int
	out, command        string
}

// row is one line of the table: what it measures and both sides' figures.
type row struct {
	job, what string
	a, b      stats // libOS, Deno
	ratio     float64
	unit      string // "ms" or "MB" or "calls/s" or "×"
	note      string
	target    string
	// meets says whether the row meets its target; nil for a row without one.
	meets     func(r row) bool
	aText     string // overrides the formatted figures when set
	bText     string
	ratioText string
}

type stats struct{ p50, p90, p99 float64 }

func summarize(v []float64) stats {
	if len(v) == 0 {
		return stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return stats{at(0.5), at(0.9), at(0.99)}
}

func median(v []float64) float64 { return summarize(v).p50 }

// interleave runs a and b reps times, alternating which goes first, and returns both
// sides' samples and the per-repetition ratios a/b.
func interleave(reps int, a, b func() float64) (as, bs, ratios []float64) {
	for i := range reps {
		var x, y float64
		if i%2 == 0 {
			x = a()
			y = b()
		} else {
			y = b()
			x = a()
		}
		as, bs = append(as, x), append(bs, y)
		if y > 0 {
			ratios = append(ratios, x/y)
		}
	}
	return as, bs, ratios
}

// procWarmup is how many rounds of each whole-process row run, unrecorded, before its
// samples: the first runs after a fresh link or a previous row read a colder page cache
// than the rest, and which row came first decided by how much.
const procWarmup = 3

// interleaveProc is interleave after procWarmup unrecorded rounds of both sides; reset
// runs between them, for whatever the jobs record beside their times.
func interleaveProc(reps int, reset func(), a, b func() float64) (as, bs, ratios []float64) {
	interleave(procWarmup, a, b)
	reset()
	return interleave(reps, a, b)
}

// interleaveBlocks is interleave for jobs of well under a millisecond next to a process
// whose work outlives its answer (a Deno Worker is torn down, and V8 collects, on other
// threads after it posts its result): blocks of per calls alternate between the sides,
// each block after settle of quiet, so that neither side's calls run beside the tail of
// the other's. A ratio is that of the two medians of a pair of blocks.
func interleaveBlocks(blocks, per int, settle time.Duration, a, b func() float64) (as, bs, ratios []float64) {
	run := func(f func() float64) []float64 {
		time.Sleep(settle)
		out := make([]float64, per)
		for i := range out {
			out[i] = f()
		}
		return out
	}
	for i := range blocks {
		var x, y []float64
		if i%2 == 0 {
			x = run(a)
			y = run(b)
		} else {
			y = run(b)
			x = run(a)
		}
		as, bs = append(as, x...), append(bs, y...)
		if my := median(y); my > 0 {
			ratios = append(ratios, median(x)/my)
		}
	}
	return as, bs, ratios
}

type env struct {
	cfg     config
	tmp     string
	denoDir string // warm DENO_DIR
	cache   string // warm libOS compilation cache
	script  string
	cand1   string // 1 test
	cand10  string // 10 tests
	sum     string // the whole-process candidate
	timeBin string // GNU time, for the peak RSS of a command (see proc); empty if missing
	mu      sync.Mutex
	fails   []string
}

func (e *env) fail(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if len(e.fails) < 20 {
		e.fails = append(e.fails, msg)
	}
}

// rssWhat says how the peak RSS rows of the kind runs were measured (see proc).
func rssWhat(e *env, kind string) string {
	if e.timeBin != "" {
		return "peak RSS (GNU time's %M, the command's own ru_maxrss) of the " + kind + " whole-process runs above"
	}
	return "ru_maxrss of the " + kind + " whole-process runs above, as this program's wait4 reports it: at least this program's own peak RSS (no GNU time installed)"
}

// proc runs a command and returns its wall time (ms) and peak RSS (MB).
//
// The peak RSS is taken by GNU time (/usr/bin/time -f %M) when it is installed, which
// forks the command from its own small process. The child's ru_maxrss as this program's
// wait4 reports it is not the command's peak: Linux records in it the peak of the memory
// the child had before exec, and os/exec starts a child sharing this program's memory
// (clone with CLONE_VM), so every figure would be at least this program's own peak RSS
// (about 56 MiB, which was Deno's row before). Without GNU time the rusage figure is used
// and the row says so. The wrapper adds its fork and wait, well under a millisecond, to
// both sides of every whole-process row.
func (e *env) proc(environ []string, name string, args ...string) (ms, mb float64) {
	var rssFile string
	if e.timeBin != "" {
		f, err := os.CreateTemp(e.tmp, "rss-*")
		if err != nil {
			e.fail("rss file: %v", err)
			return 0, 0
		}
		f.Close()
		rssFile = f.Name()
		defer os.Remove(rssFile)
		args = append([]string{"-f", "%M", "-o", rssFile, name}, args...)
		name = e.timeBin
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), environ...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	ms = float64(time.Since(t0).Nanoseconds()) / 1e6
	if err != nil {
		e.fail("%s %s: %v: %s", name, strings.Join(args, " "), err, liberr.Clip(out.String(), 400))
	}
	if rssFile != "" {
		b, err := os.ReadFile(rssFile)
		fields := strings.Fields(string(b))
		kb, perr := 0.0, error(nil)
		if len(fields) > 0 {
			kb, perr = strconv.ParseFloat(fields[len(fields)-1], 64)
		}
		if err != nil || len(fields) == 0 || perr != nil {
			e.fail("%s: peak RSS not reported: %v %q", name, err, b)
		}
		return ms, kb / 1024
	}
	return ms, peakRSS(cmd.ProcessState)
}

func run(cfg config) error {
	ctx := context.Background()
	for _, f := range []string{cfg.libos, cfg.deno} {
		if _, err := os.Stat(f); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "libos-bench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{cfg: cfg, tmp: tmp, denoDir: filepath.Join(tmp, "deno-warm"), cache: filepath.Join(tmp, "libos-warm"),
		script: "scripts/benchcompare/validator.ts", sum: "testdata/candidates/good_sum_exact.json"}
	if exec.Command("/usr/bin/time", "-f", "%M", "-o", os.DevNull, "true").Run() == nil {
		e.timeBin = "/usr/bin/time"
	} else {
		fmt.Fprintln(os.Stderr, "bench-compare: no GNU time (/usr/bin/time); the peak RSS rows are at least this program's own RSS")
	}
	if e.cand1, err = clockCandidate(tmp, 1); err != nil {
		return err
	}
	if e.cand10, err = clockCandidate(tmp, 10); err != nil {
		return err
	}
	load0 := loadavg()
	start := time.Now()

	var rows []row
	say := func(r row) {
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%-48s libOS %s  Deno %s  ratio %s\n", r.job, r.fmtA(), r.fmtB(), r.fmtRatio())
	}

	// Whole process, warm caches.
	if out, err := exec.Command(cfg.libos, "cache", "warm", "--cache-dir", e.cache).CombinedOutput(); err != nil {
		return fmt.Errorf("libos cache warm: %v: %s", err, out)
	}
	e.proc([]string{"DENO_DIR=" + e.denoDir}, cfg.deno, "run", "-q", "--allow-read", e.script, e.sum)
	var rssA, rssB []float64
	procA := func(cache string) func() float64 {
		return func() float64 {
			c := cache
			if c == "" {
				c = freshDir(tmp, "libos-cache")
				defer os.RemoveAll(c)
			}
			ms, mb := e.proc([]string{"LIBOS_DATA=" + filepath.Join(tmp, "data")}, cfg.libos, "validate", "--cache-dir", c, e.sum)
			rssA = append(rssA, mb)
			return ms
		}
	}
	procB := func(dir string) func() float64 {
		return func() float64 {
			d := dir
			if d == "" {
				d = freshDir(tmp, "deno-dir")
				defer os.RemoveAll(d)
			}
			ms, mb := e.proc([]string{"DENO_DIR=" + d}, cfg.deno, "run", "-q", "--allow-read", e.script, e.sum)
			rssB = append(rssB, mb)
			return ms
		}
	}
	resetRSS := func() { rssA, rssB = nil, nil }
	a, b, r := interleaveProc(cfg.reps, resetRSS, procA(e.cache), procB(e.denoDir))
	warmRSS := [2]stats{summarize(rssA), summarize(rssB)}
	say(row{job: "`libos validate one.json`, whole process, warm caches", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r),
		what:   "exec of `libos validate --cache-dir WARM good_sum_exact.json` (3 tests) vs `deno run --allow-read validator.ts good_sum_exact.json` with a DENO_DIR that already holds the transpiled script; wall time from fork to exit",
		target: "≤ 0.5×", meets: ratioAtMost(0.5)})
	a, b, r = interleaveProc(cfg.reps, resetRSS, procA(""), procB(""))
	coldRSS := [2]stats{summarize(rssA), summarize(rssB)}
	say(row{job: "the same, empty caches (a fresh CI runner)", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r),
		what:   "the same two commands, each repetition with a new empty --cache-dir and a new empty DENO_DIR",
		target: "≤ 1×", meets: ratioAtMost(1)})

	// The bare start of each binary.
	helpA := func() float64 { ms, _ := e.proc(nil, cfg.libos, "--help"); return ms }
	helpB := func() float64 { ms, _ := e.proc(nil, cfg.deno, "--version"); return ms }
	a, b, r = interleaveProc(cfg.reps, func() {}, helpA, helpB)
	say(row{job: "`libos --help` vs `deno --version`, whole process", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r),
		what: "the start of each binary doing nothing: Go runtime and package initialisation (no sandbox) vs Deno's start"})

	// In process.
	deno, err := startDeno(e)
	if err != nil {
		return err
	}
	defer deno.close()
	v, err := libos.NewValidator(ctx, libos.ValidatorOptions{CacheDir: e.cache})
	if err != nil {
		return err
	}
	defer v.Close()
	for _, c := range []struct {
		path, job, target string
		n                 int
		max               float64
	}{{e.cand1, "in-process validation, 1 test", "≤ 0.5×", 1, 0.5}, {e.cand10, "in-process validation, 10 tests", "≤ 1×", 10, 1}} {
		data, err := os.ReadFile(c.path)
		if err != nil {
			return err
		}
		libosOnce := func() float64 {
			t0 := time.Now()
			rep, err := v.Validate(ctx, data)
			ms := float64(time.Since(t0).Nanoseconds()) / 1e6
			if err != nil || !rep.OK || len(rep.Tests) != c.n {
				e.fail("libOS validate %s: %v %+v", c.path, err, rep.Errors)
			}
			return ms
		}
		denoOnce := func() float64 {
			var res struct {
				OK     bool     `json:"ok"`
				NS     float64  `json:"ns"`
				Errors []string `json:"errors"`
			}
			if err := deno.ask(map[string]any{"op": "validate", "path": c.path}, &res); err != nil || !res.OK {
				e.fail("deno validate %s: %v %v", c.path, err, res.Errors)
			}
			return res.NS / 1e6
		}
		for range 20 { // warm both: pools, JIT, module loader
			libosOnce()
			denoOnce()
		}
		a, b, r := interleave(cfg.inproc, libosOnce, denoOnce)
		say(row{job: c.job, unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r), target: c.target, meets: ratioAtMost(c.max),
			what: fmt.Sprintf("the clock candidate with %d test(s) (one clock.now syscall each, on its tape): libos.Validator.Validate in this process vs validate() in a warm `deno run` process, timed inside it (JSON parse, transpile+import of the source as a new module, the tests)", c.n)})
	}

	// JIT calls.
	sys, pid, err := jitProcess(ctx, tmp, e.cache)
	if err != nil {
		return err
	}
	defer sys.Close()
	frame := []byte(`{"name":"add","arguments":{"a":40,"b":2}}`)
	libosCall := func() float64 {
		t0 := time.Now()
		res, err := sys.HandleFrame(ctx, pid, frame)
		ms := float64(time.Since(t0).Nanoseconds()) / 1e6
		if err != nil || !strings.Contains(res.Text, `"sum":42`) {
			e.fail("libOS call: %v %v", err, res)
		}
		return ms
	}
	denoCall := func(log string) func() float64 {
		return func() float64 {
			var res struct {
				OK    bool            `json:"ok"`
				Value json.RawMessage `json:"value"`
				NS    float64         `json:"ns"`
			}
			m := map[string]any{"op": "call", "source": addSource, "args": map[string]int{"a": 40, "b": 2}}
			if log != "" {
				m["log"] = log
			}
			if err := deno.ask(m, &res); err != nil || !res.OK {
				e.fail("deno call: %v %s", err, res.Value)
			}
			return res.NS / 1e6
		}
	}
	for range 20 {
		libosCall()
		denoCall("")()
	}
	calls := max(cfg.inproc, 100)
	const perBlock, settle = 20, 100 * time.Millisecond
	blocks := max(calls/perBlock, 2)
	a, b, r = interleaveBlocks(blocks, perBlock, settle, libosCall, denoCall(""))
	say(row{job: "isolated JIT call (fresh state per call)", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r), target: "≤ 0.5 ms p50, ≤ 2 ms p99", meets: func(r row) bool { return r.a.p50 <= 0.5 && r.a.p99 <= 2 },
		what: "a registered JIT tool `add` called end to end with System.HandleFrame (adapter, input schema, tool_called, a fresh JavaScript context in the sandbox, output schema, the ToolResult synced to Pebble) vs a new Worker per call in a warm Deno process (import the tool module, run, post the result, terminate), nothing persisted; the sides alternate in blocks of 20 calls, each block after 100 ms of quiet, so that neither side's calls run beside the other's background work (a Worker's teardown, V8's collector), and the ratio is that of the blocks' medians"})
	logPath := filepath.Join(tmp, "deno-calls.log")
	a, b, r = interleaveBlocks(blocks, perBlock, settle, libosCall, denoCall(logPath))
	say(row{job: "the same, both sides durable", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r),
		what: "as above, the Deno side appending each call and its result to a log file and fdatasync-ing it before answering, as libOS syncs the call's settlement"})

	// Concurrency 16.
	const conc = 16
	libosThroughput := func() float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(cfg.calls) {
					if res, err := sys.HandleFrame(ctx, pid, frame); err != nil || !strings.Contains(res.Text, `"sum":42`) {
						e.fail("libOS call: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		return float64(cfg.calls) / time.Since(t0).Seconds()
	}
	denoThroughput := func() float64 {
		var res struct {
			OK bool    `json:"ok"`
			NS float64 `json:"ns"`
		}
		n := max(cfg.calls/40, 50) // a Worker per call is slow: fewer calls, same rate
		if err := deno.ask(map[string]any{"op": "calls", "source": addSource, "args": map[string]int{"a": 40, "b": 2},
			"n": n, "concurrency": conc, "log": logPath}, &res); err != nil || !res.OK {
			e.fail("deno calls: %v", err)
		}
		return float64(n) / (res.NS / 1e9)
	}
	a, b, r = interleave(3, libosThroughput, denoThroughput)
	say(row{job: "JIT calls/s at concurrency 16, durable", unit: "calls/s", a: summarize(a), b: summarize(b), ratio: median(r), target: "≥ 3,000 calls/s", meets: func(r row) bool { return r.a.p50 >= 3000 },
		what: "16 goroutines calling HandleFrame (each call synced) vs 16 Workers in flight in one Deno process (each call fdatasync-ed to the log); median of 3 runs each"})

	// CPU-bound JavaScript.
	cpu, err := cpuRows(ctx, e, deno)
	if err != nil {
		return err
	}
	for _, c := range cpu {
		say(c)
	}

	if fuel, err := fuelCost(); err != nil {
		fmt.Fprintln(os.Stderr, "fuel cost not measured:", err)
	} else {
		say(row{job: "fuel cost: instrumented / uninstrumented guest", unit: "×", a: stats{fuel, fuel, fuel}, bText: "—", ratioText: "—", target: "≤ 1.2×",
			meets: func(r row) bool { return r.a.p50 <= 1.2 },
			what:  "geometric mean over the CPU workloads of wasm's BenchmarkFuelCost (loop, calls, strings, RegExp, JSON, sort, BigInt, a tiny call), thread CPU time, interleaved; needs build/guest/raw.wasm from `make guest`"})
	}

	// Memory.
	say(row{job: "peak RSS, one validation process, warm caches", unit: "MiB", a: warmRSS[0], b: warmRSS[1], ratio: warmRSS[0].p50 / warmRSS[1].p50, target: "≤ 25 MiB", meets: func(r row) bool { return r.a.p50 <= 25 },
		what: rssWhat(e, "warm")})
	say(row{job: "peak RSS, one validation process, empty caches", unit: "MiB", a: coldRSS[0], b: coldRSS[1], ratio: coldRSS[0].p50 / coldRSS[1].p50, target: "≤ 25 MiB", meets: func(r row) bool { return r.a.p50 <= 25 },
		what: rssWhat(e, "empty-cache")})
	idle, anon, file, huge, err := idleServeRSS(e)
	if err != nil {
		e.fail("idle serve: %v", err)
	}
	say(row{job: "idle `libos serve`, RSS", unit: "MiB", a: stats{idle, idle, idle}, bText: "—", ratioText: "—", target: "≤ 30 MiB", meets: func(r row) bool { return r.a.p50 <= 30 },
		what: fmt.Sprintf("VmRSS of `libos serve` (stdio, a fresh store, warm cache) 2 s after start, before any request: %.1f MiB anonymous (heap, stacks, Pebble), %.1f MiB file-backed (pages of the binary mapped in; %.1f MiB of them as 2 MiB huge pages, which depends on whether the page cache holds the binary in huge folios: with them, start-up takes fewer page faults and more of the binary is mapped)", anon, file, huge)})
	per, err := perSandboxRSS(ctx, e)
	if err != nil {
		e.fail("per sandbox: %v", err)
	}
	say(row{job: "memory per live sandbox", unit: "MiB", a: stats{per, per, per}, bText: "—", ratioText: "—", target: "≤ 4 MiB", meets: func(r row) bool { return r.a.p50 <= 4 },
		what: "growth of this process's RSS with 16 calls each holding a sandbox instance (waiting in a syscall), divided by 16"})

	load1 := loadavg()
	if len(e.fails) > 0 {
		fmt.Fprintln(os.Stderr, "failures:")
		for _, f := range e.fails {
			fmt.Fprintln(os.Stderr, " ", f)
		}
		return errors.New("some runs failed; no table written")
	}
	doc := render(e, rows, load0, load1, time.Since(start))
	fmt.Print(doc)
	if cfg.out != "" {
		return os.WriteFile(cfg.out, []byte(doc), 0o644)
	}
	return nil
}

const addSource = `export function run(args: { a: number, b: number }) { return { sum: args.a + args.b }; }`

func freshDir(tmp, prefix string) string {
	d, err := os.MkdirTemp(tmp, prefix+"-")
	if err != nil {
		panic(err)
	}
	return d
}

// clockCandidate writes the clock candidate with its test repeated n times.
func clockCandidate(tmp string, n int) (string, error) {
	data, err := os.ReadFile("testdata/candidates/good_clock_now.json")
	if err != nil {
		return "", err
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		return "", err
	}
	var tests []json.RawMessage
	if err := json.Unmarshal(c["tests"], &tests); err != nil {
		return "", err
	}
	c["tests"] = json.RawMessage("[" + strings.TrimSuffix(strings.Repeat(string(tests[0])+",", n), ",") + "]")
	out, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	p := filepath.Join(tmp, fmt.Sprintf("clock_%d_tests.json", n))
	return p, os.WriteFile(p, out, 0o644)
}

// jitProcess opens a store, spawns a process of the default image and registers the
// tool add in it.
func jitProcess(ctx context.Context, tmp, cache string) (*libos.System, string, error) {
	sys, err := libos.Open(ctx, filepath.Join(tmp, "store"), libos.Options{CacheDir: cache})
	if err != nil {
		return nil, "", err
	}
	img, err := libos.DefaultImage()
	if err != nil {
		sys.Close()
		return nil, "", err
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		sys.Close()
		return nil, "", err
	}
	src, _ := json.Marshal(addSource)
	prop := `{"name":"add","description":"Add two integers.","source_code":` + string(src) + `,
		"input_schema":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false},
		"output_schema":{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"],"additionalProperties":false},
		"tests":[{"args":{"a":2,"b":3},"expected":{"sum":5},"syscalls":[]}]}`
	res, err := sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(prop))
	if err != nil {
		sys.Close()
		return nil, "", err
	}
	var p struct {
		ID string `json:"candidate_id"`
	}
	_ = json.Unmarshal(res.Structured, &p)
	id, _ := json.Marshal(map[string]string{"candidate_id": p.ID})
	if _, err := sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(id)); err != nil {
		sys.Close()
		return nil, "", err
	}
	return sys, pid, nil
}

const cpuLoop = `function run() { let s = 0; for (let i = 0; i < 5e6; i++) s += i * i; return s; }`

// cpuRows runs the CPU loop in the sandbox (fuel and time limit on), in native QuickJS
// built from the same sources when make native built it, and in Deno.
func cpuRows(ctx context.Context, e *env, deno *denoProc) ([]row, error) {
	eng, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: e.cache, PoolSize: 1})
	if err != nil {
		return nil, err
	}
	defer eng.Close(ctx)
	opts := wasm.Options{Seed: 1, Limits: wasm.Limits{WallTime: time.Minute, Fuel: 1 << 40}}
	wasmOnce := func() float64 {
		t0 := time.Now()
		if _, err := eng.Run(ctx, cpuLoop, nil, nil, opts); err != nil {
			e.fail("wasm cpu loop: %v", err)
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e6
	}
	denoOnce := func() float64 {
		var res struct {
			NS float64 `json:"ns"`
		}
		if err := deno.ask(map[string]any{"op": "cpu", "source": "export " + cpuLoop}, &res); err != nil {
			e.fail("deno cpu: %v", err)
		}
		return res.NS / 1e6
	}
	wasmOnce()
	var rows []row
	reps := max(e.cfg.reps/2, 5)
	if _, err := os.Stat(e.cfg.native); err == nil {
		nativeOnce := func() float64 {
			out, err := exec.Command(e.cfg.native, "-n", "1", "-e", cpuLoop+"\nrun();").Output()
			if err != nil {
				e.fail("%s: %v", e.cfg.native, err)
				return 0
			}
			for _, f := range strings.Fields(string(out)) {
				if v, ok := strings.CutPrefix(f, "ns_per_run="); ok {
					ns, _ := strconv.ParseFloat(v, 64)
					return ns / 1e6
				}
			}
			e.fail("no ns_per_run in %q", out)
			return 0
		}
		a, b, r := interleave(reps, wasmOnce, nativeOnce)
		rows = append(rows, row{job: "CPU-bound JS vs native QuickJS (same C)", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r), target: "≤ 2×", meets: ratioAtMost(2),
			note: "the right column is native QuickJS here, not Deno",
			what: "`for (i < 5e6) s += i*i` in the sandbox (fuel and time limit on, whole Run) vs the same QuickJS sources compiled natively (`make native`, qjs-bench, run() only)"})
	}
	a, b, r := interleave(reps, wasmOnce, denoOnce)
	rows = append(rows, row{job: "CPU-bound JS vs Deno (V8)", unit: "ms", a: summarize(a), b: summarize(b), ratio: median(r),
		what: "the same loop in the sandbox vs run() in the warm Deno process (V8's optimising JIT)"})
	return rows, nil
}

// idleServeRSS starts libos serve on stdio and reads its resident set after 2 s: the
// whole, the anonymous part, the file-backed part and how much of that is mapped as
// huge pages.
func idleServeRSS(e *env) (total, anon, file, huge float64, err error) {
	cmd := exec.Command(e.cfg.libos, "serve", "--cache-dir", e.cache, "--data", freshDir(e.tmp, "serve"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, 0, err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	time.Sleep(2 * time.Second)
	pid := cmd.Process.Pid
	if total, err = procRSS(pid, "status", "VmRSS:"); err != nil {
		return
	}
	if anon, err = procRSS(pid, "status", "RssAnon:"); err != nil {
		return
	}
	if file, err = procRSS(pid, "status", "RssFile:"); err != nil {
		return
	}
	huge, err = procRSS(pid, "smaps_rollup", "FilePmdMapped:")
	return
}

// procRSS reads a size in kB from /proc/PID/FILE, in MiB.
func procRSS(pid int, file, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/%s", field, pid, file)
}

type blockSyscaller struct{ release chan struct{} }

func (s blockSyscaller) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	<-s.release
	return json.RawMessage(`{}`), nil
}

// perSandboxRSS measures what 16 live sandboxes add to this process's resident set.
func perSandboxRSS(ctx context.Context, e *env) (float64, error) {
	const n = 16
	eng, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: e.cache, PoolSize: n})
	if err != nil {
		return 0, err
	}
	defer eng.Close(ctx)
	prog := `async function run(a, libos) { await libos.syscall("wait", {}); return 1; }`
	if _, err := eng.Run(ctx, `function run() { return 1; }`, nil, nil, wasm.Options{Seed: 1}); err != nil {
		return 0, err
	}
	runtime.GC()
	before, err := procRSS(os.Getpid(), "status", "VmRSS:")
	if err != nil {
		return 0, err
	}
	sys := blockSyscaller{release: make(chan struct{})}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := eng.Run(ctx, prog, nil, sys, wasm.Options{Seed: 1, Limits: wasm.Limits{WallTime: time.Minute}}); err != nil {
				e.fail("live sandbox: %v", err)
			}
		}()
	}
	time.Sleep(time.Second)
	after, err := procRSS(os.Getpid(), "status", "VmRSS:")
	close(sys.release)
	wg.Wait()
	return (after - before) / n, err
}

// denoProc is the warm Deno process of the in-process rows.
type denoProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startDeno(e *env) (*denoProc, error) {
	cmd := exec.Command(e.cfg.deno, "run", "-q", "--allow-read", "--allow-write", e.script, "--serve")
	cmd.Env = append(os.Environ(), "DENO_DIR="+e.denoDir)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &denoProc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

func (d *denoProc) ask(req any, res any) error {
	b, _ := json.Marshal(req)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		return err
	}
	line, err := d.out.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, res)
}

func (d *denoProc) close() {
	d.in.Close()
	_ = d.cmd.Wait()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// fuelCost runs wasm's BenchmarkFuelCost briefly and returns its geometric mean ×raw.
func fuelCost() (float64, error) {
	if _, err := os.Stat("build/guest/raw.wasm"); err != nil {
		return 0, err
	}
	out, err := exec.Command("go", "test", "./wasm/", "-run", "^$", "-bench", "^BenchmarkFuelCost$", "-benchtime", "7x", "-v").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, liberr.Clip(string(out), 400))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, "geometric mean: ×raw "); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseFloat(f[0], 64)
			}
		}
	}
	return 0, fmt.Errorf("no geometric mean in the output: %s", liberr.Clip(string(out), 400))
}
