package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// insn is one machine instruction of a guest function.
type insn struct {
	off     int    // offset in the compiled guest's code
	bytes   string // hex, as objdump prints it
	text    string // mnemonic and operands (AT&T syntax)
	samples int
}

// objdumpLine is "   1cf28:\t48 89 e5             \tmov    %rsp,%rbp". Long
// instructions continue their bytes on a line without a mnemonic.
var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*(?:\t(.*))?$`)

// disassemble runs GNU objdump on local function fn's machine code as raw x86-64.
func disassemble(c *compiled, fn int) ([]insn, error) {
	f, err := os.CreateTemp("", "guestperf-fn-*.bin")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	start := c.offsets[fn]
	if _, err := f.Write(c.code[start : start+c.size(fn)]); err != nil {
		return nil, err
	}
	f.Close()
	out, err := exec.Command("objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
		"--adjust-vma=0x"+strconv.FormatInt(int64(start), 16), f.Name()).Output()
	if err != nil {
		return nil, fmt.Errorf("objdump: %w", err)
	}
	return parseObjdump(string(out)), nil
}

func parseObjdump(out string) []insn {
	var insns []insn
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := objdumpLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		off, err := strconv.ParseInt(m[1], 16, 64)
		if err != nil {
			continue
		}
		if m[3] == "" { // continuation of the previous instruction's bytes
			if n := len(insns); n > 0 {
				insns[n-1].bytes += " " + m[2]
			}
			continue
		}
		insns = append(insns, insn{off: int(off), bytes: m[2], text: strings.Join(strings.Fields(m[3]), " ")})
	}
	return insns
}

func writeListing(path string, insns []insn, total int) error {
	return writeListingWith(path, insns, classify(insns), total)
}

func writeListingWith(path string, insns []insn, cls []string, total int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i, in := range insns {
		p := ""
		if in.samples > 0 {
			p = fmt.Sprintf("%6.2f", 100*float64(in.samples)/float64(max(total, 1)))
		}
		fmt.Fprintf(w, "%6s %5d  %8x  %-14s %s\n", p, in.samples, in.off, cls[i], in.text)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
