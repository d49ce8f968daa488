package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Kinds of instruction in the native build (gcc or clang, computed goto): the dispatch
// every handler ends with, and the stack-frame traffic. There are no bounds or fuel checks.
const kindDispatch = "dispatch" // movzbl of the opcode, the table load, jmp *%reg

// profileNative samples qjs-bench (make native) running the same program and annotates
// the same function, so that both builds are read with the same kinds.
func profileNative(cfg config, w io.Writer) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	fn := cfg.fn
	if fn == "" {
		fn = "JS_CallInternal"
	}
	data := filepath.Join(cfg.out, "native.perf.data")
	runs := strconv.Itoa(max(1, int(cfg.seconds*3)))
	rec := exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-F", strconv.Itoa(cfg.freq), "-o", data, "--",
		cfg.native, "-n", runs, "-e", cfg.js+"\nrun();")
	rec.Stderr = os.Stderr
	if out, err := rec.Output(); err != nil {
		return fmt.Errorf("perf record %s: %w", cfg.native, err)
	} else {
		fmt.Fprintf(w, "%s: %s", cfg.native, out)
	}
	script, err := exec.Command("perf", "script", "-i", data, "-F", "ip,sym,symoff").Output()
	if err != nil {
		return fmt.Errorf("perf script: %w", err)
	}
	total, perSym := 0, map[string]int{}
	atOff := map[int]int{}
	sc := bufio.NewScanner(strings.NewReader(string(script)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		total++
		sym, off, _ := strings.Cut(f[1], "+0x")
		perSym[sym]++
		if sym == fn {
			if n, err := strconv.ParseInt(off, 16, 64); err == nil {
				atOff[int(n)]++
			}
		}
	}
	out, err := exec.Command("objdump", "-d", "--disassemble="+fn, cfg.native).Output()
	if err != nil {
		return fmt.Errorf("objdump: %w", err)
	}
	insns := parseObjdump(string(out))
	if len(insns) == 0 {
		return fmt.Errorf("objdump found no %s in %s", fn, cfg.native)
	}
	start := insns[0].off
	for i := range insns {
		insns[i].off -= start
		insns[i].samples = atOff[insns[i].off]
	}
	fmt.Fprintf(w, "samples: %d (cpu-clock, %d Hz)\n", total, cfg.freq)
	keys, counts := []string{}, map[int]int{}
	for k, n := range perSym {
		counts[len(keys)] = n
		keys = append(keys, k)
	}
	for _, kv := range sorted(counts) {
		if 100*kv.n < total/2 {
			break
		}
		fmt.Fprintf(w, "  %5.1f %%  %s\n", 100*float64(kv.n)/float64(total), keys[kv.k])
	}
	cls := classifyNative(insns)
	fnSamples := perSym[fn]
	listing := filepath.Join(cfg.out, "native."+fn+".annotated.txt")
	if err := writeListingWith(listing, insns, cls, fnSamples); err != nil {
		return err
	}
	byClass, nClass := map[string]int{}, map[string]int{}
	for i, in := range insns {
		byClass[cls[i]] += in.samples
		nClass[cls[i]]++
	}
	fmt.Fprintf(w, "\n%s: %d samples; full annotated listing in %s\n", fn, fnSamples, listing)
	for _, k := range []string{kindOther, kindSpill, kindReload, kindDispatch} {
		fmt.Fprintf(w, "  %-14s %7.1f %% %6d i\n", k, 100*float64(byClass[k])/float64(max(fnSamples, 1)), nClass[k])
	}
	if names, err := opcodeNames(cfg.opcodes); err != nil {
		fmt.Fprintln(w, "\nper bytecode: not available:", err)
	} else if handlers, err := nativeHandlers(cfg.native, fn); err != nil {
		fmt.Fprintln(w, "\nper bytecode: not available:", err)
	} else {
		per := perOpcode(insns, handlers, func(int) bool { return false }, start)
		writeOpcodes(w, "its samples by bytecode handler (each with its own dispatch)", per, handlers, names, fnSamples, 12)
	}
	return nil
}

// classifyNative marks each handler's dispatch (the up to four instructions before a
// jmp *%reg that load the next opcode and its table entry) and the frame's loads and
// stores, here addressed from %rbp or %rsp.
func classifyNative(insns []insn) []string {
	out := make([]string, len(insns))
	for i := range out {
		out[i] = kindOther
	}
	for i, in := range insns {
		op, args := split(in.text)
		if op == "jmp" && len(args) == 1 && strings.HasPrefix(args[0], "*%") {
			out[i] = kindDispatch
			for j := i - 1; j >= max(0, i-4); j-- {
				o, a := split(insns[j].text)
				table := o == "mov" && len(a) == 2 && strings.HasSuffix(a[0], ",8)")
				opcode := strings.HasPrefix(o, "movzb")
				lea := o == "lea" && strings.Contains(insns[j].text, "dispatch_table")
				copyIdx := o == "mov" && len(a) == 2 && strings.HasPrefix(a[0], "%") && strings.HasPrefix(a[1], "%")
				if table || opcode || lea || copyIdx {
					out[j] = kindDispatch
				}
			}
		}
	}
	markFrameMoves(insns, out, func(a string) bool { return strings.HasSuffix(a, "(%rsp)") || strings.HasSuffix(a, "(%rbp)") })
	return out
}
