package main

import (
	"strconv"
	"strings"
)

// The kinds of instruction classify tells apart in wazero 1.12's amd64 code. They come from
// the shapes its backend emits (internal/engine/wazevo/backend/isa/amd64), not from the
// guest: a shape that does not match exactly stays "other", so a share is a lower bound.
const (
	kindBounds   = "bounds-check" // cmp of an access's end with the memory's length, jae past the trap exit
	kindTrapExit = "trap-exit"    // the out-of-line exit to the host a failed check jumps to (cold)
	kindFuel     = "fuel-check"   // sub cost, cmp 0, jge over the call to the fuel import (wasm/internal/fuel)
	kindBrTable  = "br_table"     // the index clamp and the jump through a table of relative offsets
	kindSpill    = "spill"        // a store to the function's stack frame
	kindReload   = "reload"       // a load from the function's stack frame
	kindOther    = "other"        // the work: arithmetic, guest memory loads and stores, compares
)

// classify gives every instruction one kind. Where shapes overlap, the more specific wins:
// the fuel check's reload of the fuel counter is fuel-check, not reload.
func classify(insns []insn) []string {
	out := make([]string, len(insns))
	for i := range out {
		out[i] = kindOther
	}
	at := map[int]int{} // offset → index
	for i, in := range insns {
		at[in.off] = i
	}
	for i, in := range insns {
		op, args := split(in.text)
		switch {
		case op == "mov" && len(args) == 2 && strings.HasPrefix(args[1], "0x38(") && args[0] == "%rsp":
			// The trap exit: save rsp/rbp into the execution context, the exit code into its
			// first word, and return to the Go side (ends in ret).
			for j := i; j < len(insns); j++ {
				out[j] = kindTrapExit
				if insns[j].text == "ret" {
					break
				}
			}
		case op == "jmp" && len(args) == 1 && strings.HasPrefix(args[0], "*%"):
			// br_table: [add $bias,idx;] mov $n,r; cmp r,idx; cmovae r,idx; lea (rip),t;
			// add (t,idx,8),t; jmp *t.
			shape := []string{"add", "lea", "cmovae", "cmp", "mov"}
			j := i - 1
			for _, want := range shape {
				if j < 0 {
					break
				}
				if o, _ := split(insns[j].text); o != want {
					break
				}
				j--
			}
			if i-j-1 == len(shape) {
				for k := j + 1; k <= i; k++ {
					out[k] = kindBrTable
				}
				if j >= 0 {
					if o, a := split(insns[j].text); (o == "add" || o == "sub") && len(a) == 2 && strings.HasPrefix(a[0], "$") {
						out[j] = kindBrTable
					}
				}
			} else {
				out[i] = kindBrTable
			}
		}
	}
	for i, in := range insns {
		op, args := split(in.text)
		if !isJcc(op) || len(args) != 1 || i+1 >= len(insns) {
			continue
		}
		// A bounds check falls through into a trap exit whose code is
		// ExitCodeMemoryOutOfBounds (4) and jumps over it when the access fits.
		if out[i+1] == kindTrapExit && exitCode(insns, i+1) == 4 {
			markBounds(insns, out, i)
			continue
		}
		// The fuel check: sub $cost,f; cmp $0x0,f; jge (local $f is an i64).
		if op == "jge" && i >= 2 {
			o1, a1 := split(insns[i-1].text)
			o2, a2 := split(insns[i-2].text)
			if o1 == "cmp" && len(a1) == 2 && a1[0] == "$0x0" && o2 == "sub" && len(a2) == 2 && a2[1] == a1[1] && strings.HasPrefix(a2[0], "$") {
				out[i], out[i-1], out[i-2] = kindFuel, kindFuel, kindFuel
				if i >= 3 {
					if o, a := split(insns[i-3].text); o == "mov" && len(a) == 2 && isFrame(a[0]) && reg64(a[1]) == reg64(a1[1]) {
						out[i-3] = kindFuel // reload of the fuel counter
					}
				}
				if t, ok := target(args[0]); ok {
					if k, ok := at[t]; ok {
						if o, a := split(insns[k].text); o == "mov" && len(a) == 2 && isFrame(a[1]) && reg64(a[0]) == reg64(a1[1]) {
							out[k] = kindFuel // its spill on the way on
						}
					}
				}
			}
		}
	}
	markFrameMoves(insns, out, isFrame)
	return out
}

// markFrameMoves marks every mov still unclassified that stores to the stack frame as a
// spill and every one that loads from it as a reload; frame says which operands address
// the frame (wazero's code and the native build address it differently).
func markFrameMoves(insns []insn, out []string, frame func(string) bool) {
	for i, in := range insns {
		if out[i] != kindOther {
			continue
		}
		op, args := split(in.text)
		if !strings.HasPrefix(op, "mov") || len(args) != 2 {
			continue
		}
		switch {
		case frame(args[1]):
			out[i] = kindSpill
		case frame(args[0]):
			out[i] = kindReload
		}
	}
}

// markBounds marks the jcc at i and what computes its operands: the cmp before it, the
// copy of the execution context the trap exit uses, the add of the access's end offset
// and the copy of the address it works on.
func markBounds(insns []insn, out []string, i int) {
	out[i] = kindBounds
	var cmpArgs []string
	for j := i - 1; j >= max(0, i-6); j-- {
		op, args := split(insns[j].text)
		switch {
		case cmpArgs == nil && op == "cmp" && len(args) == 2:
			out[j] = kindBounds
			cmpArgs = args
		case op == "mov" && len(args) == 2 && args[0] == "%r13":
			out[j] = kindBounds // the execution context for the exit
		case cmpArgs != nil && op == "add" && len(args) == 2 && strings.HasPrefix(args[0], "$") && reg64(args[1]) == reg64(cmpArgs[0]):
			out[j] = kindBounds
			if j > 0 {
				if o, a := split(insns[j-1].text); o == "mov" && len(a) == 2 && reg64(a[1]) == reg64(cmpArgs[0]) && strings.HasPrefix(a[0], "%") {
					out[j-1] = kindBounds
					j--
				}
			}
		case cmpArgs != nil && op == "mov" && len(args) == 2 && reg64(args[1]) == reg64(cmpArgs[1]) && strings.HasPrefix(args[0], "0x10("):
			out[j] = kindBounds // the memory's length, from the module context
		}
	}
}

// exitCode reads the exit code a trap exit starting at i stores: mov $code,%ebp.
func exitCode(insns []insn, i int) int {
	for j := i; j < min(len(insns), i+4); j++ {
		if op, args := split(insns[j].text); op == "mov" && len(args) == 2 && args[1] == "%ebp" && strings.HasPrefix(args[0], "$") {
			n, err := strconv.ParseInt(strings.TrimPrefix(args[0], "$"), 0, 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

func isJcc(op string) bool {
	return len(op) >= 2 && op[0] == 'j' && op != "jmp"
}

// isFrame reports whether an operand is a slot of the stack frame: N(%rsp).
func isFrame(a string) bool {
	return strings.HasSuffix(a, "(%rsp)")
}

func target(a string) (int, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(a, "0x"), 16, 64)
	return int(n), err == nil
}

// split parses AT&T "op a,b" into op and operands, keeping "(%r,%r,8)" whole and
// dropping objdump's "# comment".
func split(text string) (string, []string) {
	if i := strings.Index(text, " #"); i >= 0 {
		text = text[:i]
	}
	op, rest, _ := strings.Cut(text, " ")
	var args []string
	depth, start := 0, 0
	for i, r := range rest {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, rest[start:i])
				start = i + 1
			}
		}
	}
	if rest != "" {
		args = append(args, rest[start:])
	}
	return op, args
}

// reg64 names a register by its 64-bit form: %ecx → %rcx, %r8d → %r8.
func reg64(r string) string {
	if !strings.HasPrefix(r, "%") {
		return r
	}
	n := r[1:]
	switch {
	case strings.HasPrefix(n, "r") && (strings.HasSuffix(n, "d") || strings.HasSuffix(n, "w") || strings.HasSuffix(n, "b")) && len(n) >= 3 && n[1] >= '0' && n[1] <= '9':
		return "%" + n[:len(n)-1]
	case len(n) == 3 && n[0] == 'e':
		return "%r" + n[1:]
	}
	return r
}
