package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Per bytecode: QuickJS dispatches with `goto *dispatch_table[opcode = *pc++]`, so the
// table says where each opcode's handler starts. In the native build the table holds the
// handlers' addresses (relocations of the PIE); in the guest it holds small label numbers
// in linear memory, which the dispatch block turns into a br_table index (bias, clamp)
// and then into an address through the jump table after its lea. A sample belongs to the
// handler whose start is the nearest at or below it, which is exact for a handler's own
// code and approximate for code the compiler placed out of line.

// opcodeNames reads the opcodes in their numbering: the DEF lines of quickjs-opcode.h (the
// lowercase def lines are the compiler's temporary opcodes, numbered after OP_COUNT).
func opcodeNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	re := regexp.MustCompile(`^DEF\(\s*([A-Za-z0-9_]+)\s*,`)
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no DEF lines", path)
	}
	return names, sc.Err()
}

// guestHandlers maps each opcode to the offset of its handler in the compiled guest, from
// the dispatch table's bytes (table, 256 little-endian u32) and the br_table that ends
// in the indirect jump at index hi.
func guestHandlers(c *compiled, insns []insn, hi int, table []byte) (map[int]int, error) {
	var bias, clamp int64
	var jt int
	found := 0
	for i := max(0, hi-6); i <= hi; i++ {
		op, args := split(insns[i].text)
		switch {
		case op == "add" && len(args) == 2 && strings.HasPrefix(args[0], "$") && i+6 == hi:
			v, err := strconv.ParseUint(strings.TrimPrefix(args[0], "$0x"), 16, 64)
			if err != nil {
				return nil, err
			}
			bias = int64(int32(uint32(v)))
			found++
		case op == "mov" && len(args) == 2 && strings.HasPrefix(args[0], "$") && i+5 == hi:
			v, err := strconv.ParseInt(strings.TrimPrefix(args[0], "$0x"), 16, 64)
			if err != nil {
				return nil, err
			}
			clamp = v
			found++
		case op == "lea" && strings.Contains(insns[i].text, "(%rip)") && i+2 == hi:
			j := strings.LastIndex(insns[i].text, "# 0x")
			if j < 0 {
				return nil, fmt.Errorf("lea without a target: %s", insns[i].text)
			}
			v, err := strconv.ParseInt(insns[i].text[j+4:], 16, 64)
			if err != nil {
				return nil, err
			}
			jt = int(v)
			found++
		}
	}
	if found != 3 {
		return nil, fmt.Errorf("the dispatch block does not end in wazero's br_table shape")
	}
	if len(table) != 256*4 {
		return nil, fmt.Errorf("dispatch table of %d bytes, want 1024", len(table))
	}
	out := map[int]int{}
	for op := range 256 {
		idx := int64(binary.LittleEndian.Uint32(table[4*op:])) + bias
		if uint64(idx) >= uint64(clamp) {
			idx = clamp
		}
		at := jt + 8*int(idx)
		if at+8 > len(c.code) {
			return nil, fmt.Errorf("jump table entry %d past the code", idx)
		}
		out[op] = jt + int(int64(binary.LittleEndian.Uint64(c.code[at:])))
	}
	return out, nil
}

// nativeHandlers maps each opcode to its handler's offset in the native function, from
// the R_X86_64_RELATIVE relocations that fill the PIE's dispatch table.
func nativeHandlers(binary, fn string) (map[int]int, error) {
	syms, err := exec.Command("nm", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("nm: %w", err)
	}
	var table, start uint64
	for _, l := range strings.Split(string(syms), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		v, _ := strconv.ParseUint(f[0], 16, 64)
		switch {
		case strings.HasPrefix(f[2], "dispatch_table"):
			table = v
		case f[2] == fn:
			start = v
		}
	}
	if table == 0 || start == 0 {
		return nil, fmt.Errorf("%s: no dispatch_table or %s symbol", binary, fn)
	}
	rel, err := exec.Command("readelf", "-rW", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("readelf: %w", err)
	}
	out := map[int]int{}
	for _, l := range strings.Split(string(rel), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || f[2] != "R_X86_64_RELATIVE" {
			continue
		}
		off, err1 := strconv.ParseUint(f[0], 16, 64)
		add, err2 := strconv.ParseUint(f[3], 16, 64)
		if err1 != nil || err2 != nil || off < table || off >= table+256*8 {
			continue
		}
		out[int(off-table)/8] = int(add - start)
	}
	if len(out) != 256 {
		return nil, fmt.Errorf("%s: %d relocated entries in the dispatch table, want 256", binary, len(out))
	}
	return out, nil
}

// perOpcode gives each sampled instruction to the bytecode whose handler reaches it: the
// function's control flow is walked from every handler's start, along direct jumps and
// fall-throughs, stopping at another handler's start and at the instructions in stop (the
// guest's shared dispatch block). Code reached from more than one handler (shared tails,
// helpers inlined once) goes to -1, "shared". bias is subtracted from jump targets to put
// them in the insns' offset space. The compilers lay blocks out in their own order, so
// the walk, not the address, decides.
func perOpcode(insns []insn, handlers map[int]int, stop func(i int) bool, bias int) map[int]int {
	at := make(map[int]int, len(insns))
	for i, in := range insns {
		at[in.off] = i
	}
	opAt := map[int]int{} // index of a handler's first instruction → lowest opcode using it
	for op, off := range handlers {
		if i, ok := at[off]; ok {
			if o, seen := opAt[i]; !seen || op < o {
				opAt[i] = op
			}
		}
	}
	owner := make([]int, len(insns)) // 0 none, op+1, or -1 shared
	for start, op := range opAt {
		seen := map[int]bool{}
		work := []int{start}
		for len(work) > 0 {
			i := work[len(work)-1]
			work = work[:len(work)-1]
			for ; i < len(insns); i++ {
				if seen[i] || stop(i) {
					break
				}
				if _, other := opAt[i]; other && i != start {
					break
				}
				seen[i] = true
				switch owner[i] {
				case 0:
					owner[i] = op + 1
				case op + 1:
				default:
					owner[i] = -1
				}
				o, args := split(insns[i].text)
				if len(o) == 0 || o[0] != 'j' {
					if o == "ret" || o == "ud2" {
						break
					}
					continue
				}
				if len(args) == 1 && !strings.HasPrefix(args[0], "*") {
					f := strings.Fields(args[0])
					if t, err := strconv.ParseInt(strings.TrimPrefix(f[0], "0x"), 16, 64); err == nil {
						if k, ok := at[int(t)-bias]; ok {
							work = append(work, k)
						}
					}
				}
				if o == "jmp" {
					break
				}
			}
		}
	}
	out := map[int]int{}
	for i, in := range insns {
		if in.samples == 0 || stop(i) {
			continue
		}
		switch {
		case owner[i] > 0:
			out[owner[i]-1] += in.samples
		case owner[i] < 0:
			out[-1] += in.samples
		default:
			out[-2] += in.samples
		}
	}
	return out
}

// writeOpcodes prints the hottest handlers with their share of the function's samples.
func writeOpcodes(w io.Writer, title string, per, handlers map[int]int, names []string, total, top int) {
	fmt.Fprintf(w, "\n%s (%% of the function's samples):\n", title)
	for i, kv := range sorted(per) {
		if i == top {
			break
		}
		name := fmt.Sprintf("op %d", kv.k)
		switch {
		case kv.k == -1:
			name = "(shared by several handlers)"
		case kv.k == -2:
			name = "(reached from no handler)"
		case kv.k < len(names):
			var same []string // opcodes sharing the handler (post_inc and post_dec…)
			for op := range 256 {
				if handlers[op] == handlers[kv.k] && op < len(names) {
					same = append(same, names[op])
				}
			}
			name = strings.Join(same, "/")
		}
		fmt.Fprintf(w, "  %5.1f %%  %s\n", 100*float64(kv.n)/float64(max(total, 1)), name)
	}
}
