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
	checkInsts      = 12
	bulkChargeInsts = 8
)

// Check proves that mod is instrumented: it imports ImportModule.ImportName with type
// (i64) → (i64), exports GlobalExport as a mutable i64 global it defines, every function
// body and every loop body begins with the check, and nothing but a check writes the
// global or calls the import. It decodes every instruction, so code that slipped past the
// rewrite (or an opcode it does not know) fails it.
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
	if err := r.locals(); err != nil {
		return 0, 0, err
	}
	insts, err := decodeExpr(r)
	if err != nil {
		return 0, 0, err
	}
	// isCheck reports whether a check starts at insts[i].
	isCheck := func(i int) bool {
		if i+checkInsts > len(insts) || insts[i+1].op != opI64Const {
			return false
		}
		c := &reader{b: body[insts[i+1].start+1 : insts[i+1].end]}
		cost, err := c.s64()
		if err != nil || cost < 1 {
			return false
		}
		want := appendCheck(nil, cost, fuelFunc, fuelGlobal)
		return bytes.Equal(body[insts[i].start:insts[i+checkInsts-1].end], want)
	}
	if !isCheck(0) {
		return 0, 0, errors.New("does not begin with the fuel check")
	}
	// Every memory.copy and memory.fill pays for its length first; those charges are
	// the only other writes of the fuel.
	charge := make([]bool, len(insts))
	for i, in := range insts {
		if !isBulk(body, in) {
			continue
		}
		j := i - bulkChargeInsts
		if j < 0 || insts[j].op != opLocalTee {
			return 0, 0, fmt.Errorf("the bulk memory instruction at byte %d is not charged", in.start)
		}
		scratch, err := (&reader{b: body[insts[j].start+1 : insts[j].end]}).u32()
		if err != nil || !bytes.Equal(body[insts[j].start:insts[i-1].end], appendBulkCharge(nil, scratch, fuelGlobal)) {
			return 0, 0, fmt.Errorf("the bulk memory instruction at byte %d is not charged", in.start)
		}
		for k := j; k < i; k++ {
			charge[k] = true
		}
		bulk++
	}
	for i := checkInsts; i < len(insts); i++ {
		in := insts[i]
		switch {
		case charge[i]:
		case in.op == opLoop:
			if !isCheck(i + 1) {
				return 0, 0, fmt.Errorf("the loop at byte %d does not begin with the fuel check", in.start)
			}
			loops++
			i += checkInsts
		case in.op == opGlobalSet && in.idx == fuelGlobal:
			return 0, 0, fmt.Errorf("byte %d writes the fuel outside a check", in.start)
		case (in.op == opCall || in.op == opRefFunc) && in.idx == fuelFunc:
			return 0, 0, fmt.Errorf("byte %d reaches the fuel import outside a check", in.start)
		}
	}
	return loops, bulk, nil
}
