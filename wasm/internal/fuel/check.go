package fuel

import (
	"bytes"
	"errors"
	"fmt"
)

// Coverage is what Check proved.
type Coverage struct {
	Functions int // function bodies that begin with the check
	Loops     int // loop bodies that begin with the check
	Bulk      int // memory.copy and memory.fill instructions charged for their length
}

// checkInsts and bulkChargeInsts are how many instructions appendCheck and
// appendBulkCharge emit.
const (
	checkInsts      = 11
	bulkChargeInsts = 8
)

// Check proves that mod is instrumented: it imports ImportModule.ImportName with type
// (i64) → (i64), exports GlobalExport as a mutable i64 global it defines, and in every
// function body the fuel local is loaded from the global first, the check runs at the
// start of the body and of every loop body, the fuel is stored before and reloaded after
// every call and stored before every way out, every bulk memory instruction is charged,
// and nothing else writes the global or the local or reaches the import. It decodes every
// instruction, so code that slipped past the rewrite (or an opcode it does not know)
// fails it.
func Check(mod []byte) (Coverage, error) {
	var cov Coverage
	secs, err := split(mod)
	if err != nil {
		return cov, err
	}
	var sigs [][2][]byte
	if body := sectionBody(secs, secType); body != nil {
		r := &reader{b: body}
		n, err := r.u32()
		if err != nil {
			return cov, err
		}
		for i := uint32(0); i < n; i++ {
			if form, err := r.byte(); err != nil || form != 0x60 {
				return cov, fmt.Errorf("fuel: type %d is not a function type", i)
			}
			p, err := r.vecBytes()
			if err != nil {
				return cov, err
			}
			q, err := r.vecBytes()
			if err != nil {
				return cov, err
			}
			sigs = append(sigs, [2][]byte{p, q})
		}
	}

	fuelFunc, found := uint32(0), false
	var funcs, globals uint32
	if body := sectionBody(secs, secImport); body != nil {
		r := &reader{b: body}
		n, err := r.u32()
		if err != nil {
			return cov, err
		}
		for i := uint32(0); i < n; i++ {
			mod, err1 := r.name()
			name, err2 := r.name()
			kind, err3 := r.byte()
			if err := errors.Join(err1, err2, err3); err != nil {
				return cov, fmt.Errorf("fuel: import %d: %w", i, err)
			}
			switch kind {
			case kindFunc:
				t, err := r.u32()
				if err != nil {
					return cov, err
				}
				if mod == ImportModule && name == ImportName {
					if int(t) >= len(sigs) || !bytes.Equal(sigs[t][0], []byte{valI64}) || !bytes.Equal(sigs[t][1], []byte{valI64}) {
						return cov, fmt.Errorf("fuel: import %s.%s is not (i64) → (i64)", mod, name)
					}
					fuelFunc, found = funcs, true
				}
				funcs++
			case kindTable:
				if _, err = r.byte(); err == nil {
					err = r.limits()
				}
			case kindMemory:
				err = r.limits()
			case kindGlobal:
				_, err = r.bytes(2)
				globals++
			case kindTag:
				if _, err = r.byte(); err == nil {
					_, err = r.u32()
				}
			default:
				err = fmt.Errorf("unknown kind %d", kind)
			}
			if err != nil {
				return cov, fmt.Errorf("fuel: import %s.%s: %w", mod, name, err)
			}
		}
	}
	if !found {
		return cov, fmt.Errorf("fuel: the module does not import %s.%s", ImportModule, ImportName)
	}

	var globalTypes [][]byte
	if body := sectionBody(secs, secGlobal); body != nil {
		r := &reader{b: body}
		n, err := r.u32()
		if err != nil {
			return cov, err
		}
		for i := uint32(0); i < n; i++ {
			typ, err := r.bytes(2)
			if err != nil {
				return cov, err
			}
			if _, err := decodeExpr(r); err != nil {
				return cov, fmt.Errorf("fuel: global %d: %w", i, err)
			}
			globalTypes = append(globalTypes, typ)
		}
	}
	fuelGlobal, found := uint32(0), false
	if body := sectionBody(secs, secExport); body != nil {
		r := &reader{b: body}
		n, err := r.u32()
		if err != nil {
			return cov, err
		}
		for i := uint32(0); i < n; i++ {
			name, err1 := r.name()
			kind, err2 := r.byte()
			idx, err3 := r.u32()
			if err := errors.Join(err1, err2, err3); err != nil {
				return cov, fmt.Errorf("fuel: export %d: %w", i, err)
			}
			if name == GlobalExport && kind == kindGlobal {
				fuelGlobal, found = idx, true
			}
		}
	}
	if !found {
		return cov, fmt.Errorf("fuel: the module does not export the global %q", GlobalExport)
	}
	if fuelGlobal < globals || int(fuelGlobal-globals) >= len(globalTypes) ||
		!bytes.Equal(globalTypes[fuelGlobal-globals], []byte{valI64, 0x01}) {
		return cov, fmt.Errorf("fuel: %q is not a mutable i64 global the module defines", GlobalExport)
	}

	code := sectionBody(secs, secCode)
	if code == nil {
		return cov, errors.New("fuel: module has no code section")
	}
	r := &reader{b: code}
	n, err := r.u32()
	if err != nil {
		return cov, err
	}
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return cov, err
		}
		b, err := r.bytes(int(size))
		if err != nil {
			return cov, err
		}
		loops, bulk, err := checkBody(b, fuelFunc, fuelGlobal)
		if err != nil {
			return cov, fmt.Errorf("fuel: function body %d: %w", i, err)
		}
		cov.Functions++
		cov.Loops += loops
		cov.Bulk += bulk
	}
	return cov, nil
}

func checkBody(body []byte, fuelFunc, fuelGlobal uint32) (loops, bulk int, err error) {
	r := &reader{b: body}
	groups, _, err := r.localGroups()
	if err != nil {
		return 0, 0, err
	}
	// The last two local groups are the rewrite's: one i64 (the fuel) and one i32.
	if groups < 2 || r.off < 4 || !bytes.Equal(body[r.off-4:r.off], []byte{1, valI64, 1, valI32}) {
		return 0, 0, errors.New("does not declare the fuel locals")
	}
	insts, err := decodeExpr(r)
	if err != nil {
		return 0, 0, err
	}
	if len(insts) < 2+checkInsts || insts[0].op != opGlobalGet || insts[0].idx != fuelGlobal || insts[1].op != opLocalSet {
		return 0, 0, errors.New("does not begin by loading the fuel")
	}
	f := insts[1].idx
	marked := make([]bool, len(insts))
	mark := func(from, to int) {
		for k := from; k < to; k++ {
			marked[k] = true
		}
	}
	// same reports whether insts[i:] begins with the bytes of want.
	same := func(i int, want []byte) bool {
		if i < 0 || i >= len(insts) {
			return false
		}
		start := insts[i].start
		return start+len(want) <= len(body) && bytes.Equal(body[start:start+len(want)], want)
	}
	// checkAt reports whether a check on f starts at insts[i].
	checkAt := func(i int) bool {
		if i+checkInsts > len(insts) || insts[i+1].op != opI64Const {
			return false
		}
		cost, err := (&reader{b: body[insts[i+1].start+1 : insts[i+1].end]}).s64()
		return err == nil && cost >= 1 && same(i, appendCheck(nil, cost, f, fuelFunc))
	}
	syncOut := appendSyncOut(nil, f, fuelGlobal)
	syncIn := appendSyncIn(nil, f, fuelGlobal)
	before := func(i int, want []byte, n int) bool {
		return i >= n && insts[i-n].start+len(want) == insts[i].start && same(i-n, want)
	}

	if !checkAt(2) {
		return 0, 0, errors.New("does not begin with the fuel check")
	}
	mark(0, 2+checkInsts)
	depth := 0
	for i := 2 + checkInsts; i < len(insts); i++ {
		if marked[i] {
			continue
		}
		in := insts[i]
		switch {
		case in.op == opLoop:
			if !checkAt(i + 1) {
				return 0, 0, fmt.Errorf("the loop at byte %d does not begin with the fuel check", in.start)
			}
			mark(i+1, i+1+checkInsts)
			loops++
		case in.op == opCallInd || (in.op == opCall && in.idx != fuelFunc):
			if !before(i, syncOut, 2) || !same(i+1, syncIn) {
				return 0, 0, fmt.Errorf("the call at byte %d does not store and reload the fuel around it", in.start)
			}
			mark(i-2, i)
			mark(i+1, i+3)
		case in.op == opReturn || exitsFunction(body, in, depth) || (in.op == opEnd && depth == 0):
			if !before(i, syncOut, 2) {
				return 0, 0, fmt.Errorf("the way out of the function at byte %d does not store the fuel", in.start)
			}
			mark(i-2, i)
		case isBulk(body, in):
			j := i - bulkChargeInsts
			if j < 0 || insts[j].op != opLocalTee {
				return 0, 0, fmt.Errorf("the bulk memory instruction at byte %d is not charged", in.start)
			}
			if !before(i, appendBulkCharge(nil, insts[j].idx, f), bulkChargeInsts) {
				return 0, 0, fmt.Errorf("the bulk memory instruction at byte %d is not charged", in.start)
			}
			mark(j, i)
			bulk++
		}
		switch in.op {
		case opBlock, opLoop, opIf:
			depth++
		case opEnd:
			depth--
		}
	}
	// Nothing but the rewrite's own sequences touches the fuel.
	for i, in := range insts {
		if marked[i] {
			continue
		}
		switch {
		case in.op == opGlobalSet && in.idx == fuelGlobal:
			return 0, 0, fmt.Errorf("byte %d writes the fuel global outside the rewrite's sequences", in.start)
		case (in.op == opLocalSet || in.op == opLocalTee) && in.idx == f:
			return 0, 0, fmt.Errorf("byte %d writes the fuel local outside the rewrite's sequences", in.start)
		case (in.op == opCall || in.op == opRefFunc) && in.idx == fuelFunc:
			return 0, 0, fmt.Errorf("byte %d reaches the fuel import outside a check", in.start)
		}
	}
	return loops, bulk, nil
}
