package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/wasm"
)

// cpuLoop is the program of BENCHMARKS.md's CPU row (scripts/benchcompare).
const cpuLoop = `function run() { let s = 0; for (let i = 0; i < 5e6; i++) s += i * i; return s; }`

type config struct {
	child    bool
	cacheDir string
	js       string
	linkMap  string
	seconds  float64
	freq     int
	out      string
	fn       string
	top      int
	reuse    bool
	native   string
	raw      string
	opcodes  string
	static   string
	validate string
}

func main() {
	var cfg config
	flag.BoolVar(&cfg.child, "child", false, "internal: run the program in a loop for the profiler")
	flag.StringVar(&cfg.cacheDir, "cache-dir", "", "internal: wazero's compilation cache of the child")
	flag.StringVar(&cfg.js, "js", cpuLoop, "the program to profile (it defines run())")
	flag.StringVar(&cfg.linkMap, "map", "build/guest-profile/raw.map", "wasm-ld's --Map of the committed guest's link (make guest-profile writes it)")
	flag.Float64Var(&cfg.seconds, "seconds", 4, "how long perf samples")
	flag.IntVar(&cfg.freq, "freq", 4999, "perf's sampling frequency (cpu-clock), per second")
	flag.StringVar(&cfg.out, "out", "build/guest-profile", "where perf.data, the code and the listings go")
	flag.StringVar(&cfg.fn, "func", "", "the guest function to annotate (default: the hottest)")
	flag.IntVar(&cfg.top, "top", 40, "how many of the hottest instructions to list")
	flag.StringVar(&cfg.native, "native", "", "profile this native QuickJS build (make native: build/native/qjs-bench) instead of the guest")
	flag.StringVar(&cfg.raw, "raw", "build/guest/raw.wasm", "the uninstrumented guest of the same build as -map, for the dispatch table's bytes")
	flag.StringVar(&cfg.opcodes, "opcodes", "build/quickjs/quickjs-opcode.h", "QuickJS's opcode list, to name the handlers")
	flag.StringVar(&cfg.static, "static", "", "count the instructions of -func by kind in this guest build, compiled but not run (no perf)")
	flag.StringVar(&cfg.validate, "validate", "", "profile the validation of this candidate file (as 'libos validate' reads) instead of running -js")
	flag.BoolVar(&cfg.reuse, "reuse", false, "attribute the last run's samples again (OUT/perf.data, code.bin, cache.bin, base) instead of profiling")
	flag.Parse()
	var err error
	switch {
	case cfg.child:
		err = runChild(cfg)
	case cfg.static != "":
		err = staticCounts(cfg, os.Stdout)
	case cfg.native != "":
		err = profileNative(cfg, os.Stdout)
	default:
		err = profile(cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "guestperf:", err)
		os.Exit(1)
	}
}

// runChild runs the program on the committed guest, through the same engine and limits as
// the benchmark (fuel and a wall-time limit on), or validates the candidate file of
// -validate, until its standard input closes.
func runChild(cfg config) error {
	ctx := context.Background()
	if cfg.validate != "" {
		return validateChild(ctx, cfg)
	}
	eng, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: cfg.cacheDir, PoolSize: 1})
	if err != nil {
		return err
	}
	defer eng.Close(ctx)
	opts := wasm.Options{Seed: 1, Limits: wasm.Limits{WallTime: time.Minute, Fuel: 1 << 40}}
	return repeat(func() error {
		_, err := eng.Run(ctx, cfg.js, nil, nil, opts)
		return err
	})
}

// validateChild validates the candidate file cfg.validate as 'libos validate' does, with
// the sandbox's compilation cache in cfg.cacheDir.
func validateChild(ctx context.Context, cfg config) error {
	data, err := os.ReadFile(cfg.validate)
	if err != nil {
		return err
	}
	v, err := libos.NewValidator(ctx, libos.ValidatorOptions{CacheDir: cfg.cacheDir})
	if err != nil {
		return err
	}
	defer v.Close()
	return repeat(func() error {
		rep, err := v.Validate(ctx, data)
		if err == nil && !rep.OK {
			err = fmt.Errorf("%s does not validate: %+v", cfg.validate, rep.Errors)
		}
		return err
	})
}

// repeat runs once once, says "ready" to the profiler, and runs it again and again until
// standard input closes or it fails.
func repeat(once func() error) error {
	if err := once(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	fmt.Println("ready")
	for {
		select {
		case <-done:
			return nil
		default:
		}
		if err := once(); err != nil {
			return err
		}
	}
}

// profile starts the child, samples it with perf, and attributes every sample.
func profile(cfg config, w io.Writer) error {
	names, err := readNames(cfg.linkMap)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	data := filepath.Join(cfg.out, "perf.data")
	if cfg.reuse {
		b, err := os.ReadFile(filepath.Join(cfg.out, "cache.bin"))
		if err != nil {
			return err
		}
		code, err := parseCacheEntry(b)
		if err != nil {
			return err
		}
		bs, err := os.ReadFile(filepath.Join(cfg.out, "base"))
		if err != nil {
			return err
		}
		base, err := strconv.ParseUint(strings.TrimSpace(string(bs)), 16, 64)
		if err != nil {
			return err
		}
		return attributeAndReport(w, cfg, data, base, code, names)
	}
	cache, err := os.MkdirTemp("", "guestperf-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "-child", "-cache-dir", cache, "-js", cfg.js, "-validate", cfg.validate)
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); child.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		return fmt.Errorf("child did not start: %q %v", line, err)
	}
	code, err := readCache(cache)
	if err != nil {
		return err
	}
	if len(code.offsets) != len(names) {
		return fmt.Errorf("the link map names %d functions, the compiled guest has %d: the map is not of this guest", len(names), len(code.offsets))
	}
	base, err := findMapping(child.Process.Pid, code)
	if err != nil {
		return err
	}
	if err := copyFile(code.cacheFile, filepath.Join(cfg.out, "cache.bin")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "base"), []byte(strconv.FormatUint(base, 16)+"\n"), 0o644); err != nil {
		return err
	}
	rec := exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-F", strconv.Itoa(cfg.freq), "-p", strconv.Itoa(child.Process.Pid),
		"-o", data, "--", "sleep", strconv.FormatFloat(cfg.seconds, 'f', -1, 64))
	rec.Stderr = os.Stderr
	if err := rec.Run(); err != nil {
		return fmt.Errorf("perf record: %w", err)
	}
	stdin.Close()
	return attributeAndReport(w, cfg, data, base, code, names)
}

func attributeAndReport(w io.Writer, cfg config, data string, base uint64, code *compiled, names []string) error {
	script, err := exec.Command("perf", "script", "-i", data, "-F", "ip,sym,dso").Output()
	if err != nil {
		return fmt.Errorf("perf script: %w", err)
	}
	s := attribute(script, base, code)
	return report(w, cfg, s, code, names)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func readNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (run make guest-profile, which links the guest with --Map)", err)
	}
	defer f.Close()
	return parseLinkMap(f)
}

// samples are perf's samples split between the guest's machine code (by offset in it)
// and everything else (by symbol and object).
type samples struct {
	total   int
	atCode  map[int]int    // offset in the compiled guest → samples
	outside map[string]int // "symbol (object)" → samples
}

// attribute reads `perf script -F ip,sym,dso` lines: "ip sym (dso)".
func attribute(script []byte, base uint64, c *compiled) samples {
	s := samples{atCode: map[int]int{}, outside: map[string]int{}}
	sc := bufio.NewScanner(strings.NewReader(string(script)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		ip, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		s.total++
		if ip >= base && ip < base+uint64(len(c.code)) {
			s.atCode[int(ip-base)]++
			continue
		}
		s.outside[strings.Join(f[1:], " ")]++
	}
	return s
}

func report(w io.Writer, cfg config, s samples, c *compiled, names []string) error {
	perFn := map[int]int{}
	inCode := 0
	for off, n := range s.atCode {
		fn, _ := c.function(off)
		perFn[fn] += n
		inCode += n
	}
	pct := func(n int) float64 { return 100 * float64(n) / float64(max(s.total, 1)) }
	fmt.Fprintf(w, "samples: %d (cpu-clock, %d Hz, %.1f s); in the guest's machine code: %d (%.1f %%)\n",
		s.total, cfg.freq, cfg.seconds, inCode, pct(inCode))
	fmt.Fprintf(w, "compiled guest: %d functions, %d bytes of machine code (%s)\n\n", len(c.offsets), len(c.code), c.wazeroName)
	fmt.Fprintln(w, "guest functions:")
	for _, kv := range sorted(perFn) {
		if pct(kv.n) < 0.5 {
			break
		}
		fmt.Fprintf(w, "  %5.1f %%  %s (local %d, %d bytes)\n", pct(kv.n), names[kv.k], kv.k, c.size(kv.k))
	}
	fmt.Fprintln(w, "\noutside the guest:")
	outs := map[int]int{}
	keys := []string{}
	for k, n := range s.outside {
		outs[len(keys)] = n
		keys = append(keys, k)
	}
	for _, kv := range sorted(outs) {
		if pct(kv.n) < 0.5 {
			break
		}
		fmt.Fprintf(w, "  %5.1f %%  %s\n", pct(kv.n), keys[kv.k])
	}
	fn := -1
	if cfg.fn != "" {
		for i, n := range names {
			if n == cfg.fn {
				fn = i
			}
		}
		if fn < 0 {
			return fmt.Errorf("no guest function %q", cfg.fn)
		}
	} else if hot := sorted(perFn); len(hot) > 0 {
		fn = hot[0].k
	}
	if fn < 0 {
		return nil
	}
	insns, err := disassemble(c, fn)
	if err != nil {
		return err
	}
	fnSamples := perFn[fn]
	for i := range insns {
		insns[i].samples = s.atCode[insns[i].off]
	}
	listing := filepath.Join(cfg.out, names[fn]+".annotated.txt")
	if err := writeListing(listing, insns, fnSamples); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s: %d samples; full annotated listing in %s\n", names[fn], fnSamples, listing)
	cls := classify(insns)
	byClass := map[string]int{}
	for i, in := range insns {
		byClass[cls[i]] += in.samples
	}
	block, jump := dispatchBlock(insns)
	inBlock, inHandlers := map[string]int{}, map[string]int{}
	nBlock, nHandlers := map[string]int{}, map[string]int{}
	for i, in := range insns {
		if block[i] {
			inBlock[cls[i]] += in.samples
			nBlock[cls[i]]++
		} else {
			inHandlers[cls[i]] += in.samples
			nHandlers[cls[i]]++
		}
	}
	fmt.Fprintf(w, "\nits samples by kind of instruction (%% of the function's samples; instructions of the kind):\n")
	fmt.Fprintf(w, "  %-14s %8s %8s   %18s %18s\n", "kind", "all", "", "dispatch block", "elsewhere")
	for _, k := range []string{kindOther, kindSpill, kindReload, kindBounds, kindFuel, kindBrTable, kindTrapExit} {
		f := func(n int) float64 { return 100 * float64(n) / float64(max(fnSamples, 1)) }
		fmt.Fprintf(w, "  %-14s %7.1f %%          %7.1f %% %5d i   %7.1f %% %6d i\n", k, f(byClass[k]), f(inBlock[k]), nBlock[k], f(inHandlers[k]), nHandlers[k])
	}
	if jump >= 0 {
		n := 0
		for _, b := range block {
			if b {
				n++
			}
		}
		fmt.Fprintf(w, "the dispatch block is the %d instructions reachable from the join most handlers jump back to, up to its jump through the table at %x (trap exits left out)\n",
			n, insns[jump].off)
	}
	if err := guestOpcodes(w, cfg, c, insns, block, jump, fnSamples); err != nil {
		fmt.Fprintln(w, "\nper bytecode: not available:", err)
	}
	fmt.Fprintf(w, "\nits %d hottest instructions:\n", cfg.top)
	idx := make([]int, len(insns))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return insns[idx[a]].samples > insns[idx[b]].samples })
	for _, i := range idx[:min(cfg.top, len(idx))] {
		in := insns[i]
		fmt.Fprintf(w, "  %5.2f %%  %8x  %-14s %s\n", 100*float64(in.samples)/float64(max(fnSamples, 1)), in.off, cls[i], in.text)
	}
	return nil
}

type kv struct{ k, n int }

func sorted(m map[int]int) []kv {
	out := make([]kv, 0, len(m))
	for k, n := range m {
		out = append(out, kv{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n || out[i].n == out[j].n && out[i].k < out[j].k })
	return out
}

// dispatchBlock finds the interpreter's dispatch: the instruction most direct jumps of the
// function go to (where the handlers come back), and every instruction reachable from it,
// along fall-throughs and both ways of a conditional jump but never into a trap exit,
// before an indirect jump. in[i] says whether instruction i is in it; jump is the index
// of the indirect jump, -1 when none is reached within 400 instructions.
func dispatchBlock(insns []insn) (in []bool, jump int) {
	in = make([]bool, len(insns))
	at := map[int]int{}
	for i, ins := range insns {
		at[ins.off] = i
	}
	count := map[int]int{}
	for _, ins := range insns {
		if op, args := split(ins.text); op == "jmp" && len(args) == 1 {
			if t, ok := target(args[0]); ok {
				if _, ok := at[t]; ok {
					count[t]++
				}
			}
		}
	}
	best := sorted(count)
	if len(best) == 0 {
		return in, -1
	}
	kinds := classify(insns)
	jump = -1
	work := []int{at[best[0].k]}
	steps := 0
	for len(work) > 0 && steps < 400 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		for ; i < len(insns) && !in[i] && kinds[i] != kindTrapExit && steps < 400; i++ {
			in[i] = true
			steps++
			op, args := split(insns[i].text)
			if op == "ret" {
				break
			}
			if len(op) == 0 || op[0] != 'j' || len(args) != 1 {
				continue
			}
			if strings.HasPrefix(args[0], "*") {
				if jump < 0 {
					jump = i
				}
				break
			}
			if t, ok := target(args[0]); ok {
				if k, ok := at[t]; ok {
					work = append(work, k)
				}
			}
			if op == "jmp" {
				break
			}
		}
	}
	if jump < 0 {
		return make([]bool, len(insns)), -1
	}
	return in, jump
}

// guestOpcodes splits the function's samples outside the dispatch block by bytecode.
func guestOpcodes(w io.Writer, cfg config, c *compiled, insns []insn, block []bool, jump, total int) error {
	if jump < 0 {
		return fmt.Errorf("no dispatch block")
	}
	names, err := opcodeNames(cfg.opcodes)
	if err != nil {
		return err
	}
	m, err := os.Open(cfg.linkMap)
	if err != nil {
		return err
	}
	defer m.Close()
	addr, size, err := mapChunk(m, ".rodata.JS_CallInternal.dispatch_table")
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(cfg.raw)
	if err != nil {
		return err
	}
	table, err := dataAt(raw, addr, size)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.raw, err)
	}
	handlers, err := guestHandlers(c, insns, jump, table)
	if err != nil {
		return err
	}
	per := perOpcode(insns, handlers, func(i int) bool { return block[i] }, 0)
	writeOpcodes(w, "its samples outside the dispatch block, by bytecode handler", per, handlers, names, total, 12)
	return nil
}
