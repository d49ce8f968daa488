package fuel

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

var errShort = errors.New("unexpected end of data")

// reader decodes the binary format. Every method fails rather than read past the end.
type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, errShort
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b, nil
}

// leb reads an LEB128 number of at most maxBits bits and returns its raw value and the
// last byte (for sign extension).
func (r *reader) leb(maxBits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= maxBits+7 {
			return 0, errors.New("LEB128 number too long")
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.leb(32)
	if err != nil {
		return 0, err
	}
	if v > 1<<32-1 {
		return 0, errors.New("u32 out of range")
	}
	return uint32(v), nil
}

// signed skips a signed LEB128 of at most maxBits bits (its value is never needed but
// for the check's own constant, which Check reads with s64).
func (r *reader) signed(maxBits uint) error {
	_, err := r.leb(maxBits)
	return err
}

func (r *reader) s64() (int64, error) {
	var v int64
	var shift uint
	for {
		if shift >= 70 {
			return 0, errors.New("LEB128 number too long")
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("name is not UTF-8")
	}
	return string(b), nil
}

func (r *reader) vecBytes() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	return r.bytes(int(n))
}

func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.u32()
	}
	return err
}

// skipU32 skips one u32 and returns the offset after it (0 on error).
func (r *reader) skipU32() int {
	if _, err := r.u32(); err != nil {
		return 0
	}
	return r.off
}

// localGroups reads a function body's local declarations: how many groups, how many
// locals in all.
func (r *reader) localGroups() (groups, locals uint32, err error) {
	if groups, err = r.u32(); err != nil {
		return 0, 0, err
	}
	for i := uint32(0); i < groups; i++ {
		n, err := r.u32()
		if err != nil {
			return 0, 0, err
		}
		if _, err := r.byte(); err != nil {
			return 0, 0, err
		}
		if uint64(locals)+uint64(n) > 50000 {
			return 0, 0, errors.New("too many locals")
		}
		locals += n
	}
	return groups, locals, nil
}

// locals skips a function body's local declarations.
func (r *reader) locals() error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.byte(); err != nil {
			return err
		}
	}
	return nil
}

// constExpr copies a constant expression to out, renumbering ref.func.
func (r *reader) constExpr(out []byte, shift func(uint32) uint32) ([]byte, error) {
	insts, err := decodeExpr(r)
	if err != nil {
		return nil, err
	}
	for _, in := range insts {
		if in.op == opRefFunc {
			out = append(out, opRefFunc)
			out = appendU32(out, shift(in.idx))
			continue
		}
		out = append(out, r.b[in.start:in.end]...)
	}
	return out, nil
}

// Opcodes the rewrite looks at.
const (
	opUnreachable   = 0x00
	opBlock         = 0x02
	opLoop          = 0x03
	opIf            = 0x04
	opElse          = 0x05
	opEnd           = 0x0B
	opBr            = 0x0C
	opBrIf          = 0x0D
	opBrTable       = 0x0E
	opReturn        = 0x0F
	opCall          = 0x10
	opCallInd       = 0x11
	opLocalGet      = 0x20
	opLocalSet      = 0x21
	opLocalTee      = 0x22
	opGlobalGet     = 0x23
	opGlobalSet     = 0x24
	opI64Const      = 0x42
	opI64LtS        = 0x53
	opI64Sub        = 0x7D
	opI64ShrU       = 0x88
	opI64ExtendI32U = 0xAD
	opRefFunc       = 0xD2
	opPrefixFC      = 0xFC
	blockEmpty      = 0x40
)

func isControl(op byte) bool {
	switch op {
	case opUnreachable, opBlock, opLoop, opIf, opElse, opEnd, opBr, opBrIf, opBrTable, opReturn, opCall, opCallInd:
		return true
	}
	return false
}

// inst is one decoded instruction: its bytes are r.b[start:end]; idx is the function
// index of call and ref.func, the global index of global.get/set, the local index of
// local.get/set/tee, the label of br and br_if.
type inst struct {
	start, end int
	op         byte
	idx        uint32
}

// decodeExpr decodes instructions up to and including the end that closes the
// expression.
func decodeExpr(r *reader) ([]inst, error) {
	var insts []inst
	depth := 0
	for {
		in, err := decodeInst(r)
		if err != nil {
			return nil, err
		}
		insts = append(insts, in)
		switch in.op {
		case opBlock, opLoop, opIf:
			depth++
		case opEnd:
			if depth == 0 {
				return insts, nil
			}
			depth--
		}
	}
}

func decodeInst(r *reader) (inst, error) {
	in := inst{start: r.off}
	op, err := r.byte()
	if err != nil {
		return in, err
	}
	in.op = op
	fail := func(err error) (inst, error) {
		return in, fmt.Errorf("instruction 0x%02x at byte %d: %w", op, in.start, err)
	}
	switch {
	case op == opUnreachable, op == 0x01, op == opElse, op == opEnd, op == opReturn,
		op == 0x1A, op == 0x1B, // drop, select
		op >= 0x45 && op <= 0xC4, // numeric, conversions, sign extension
		op == 0xD1:               // ref.is_null
	case op == opBlock, op == opLoop, op == opIf:
		c, err := r.byte()
		if err != nil {
			return fail(err)
		}
		switch c {
		case blockEmpty, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		default: // a type index, s33
			r.off--
			if err := r.signed(33); err != nil {
				return fail(err)
			}
		}
	case op == 0x25, op == 0x26: // table.get/set
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
	case op == opBr, op == opBrIf, op == opLocalGet, op == opLocalSet, op == opLocalTee,
		op == opGlobalGet, op == opGlobalSet, op == opCall, op == opRefFunc:
		if in.idx, err = r.u32(); err != nil {
			return fail(err)
		}
	case op == opBrTable:
		n, err := r.u32()
		if err != nil {
			return fail(err)
		}
		for i := uint32(0); i <= n; i++ {
			if _, err := r.u32(); err != nil {
				return fail(err)
			}
		}
	case op == opCallInd:
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
	case op == 0x1C: // select t*
		if _, err := r.vecBytes(); err != nil {
			return fail(err)
		}
	case op >= 0x28 && op <= 0x3E: // loads and stores: align, offset
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
	case op == 0x3F, op == 0x40: // memory.size, memory.grow
		if _, err := r.u32(); err != nil {
			return fail(err)
		}
	case op == 0x41:
		if err := r.signed(32); err != nil {
			return fail(err)
		}
	case op == opI64Const:
		if err := r.signed(64); err != nil {
			return fail(err)
		}
	case op == 0x43:
		if _, err := r.bytes(4); err != nil {
			return fail(err)
		}
	case op == 0x44:
		if _, err := r.bytes(8); err != nil {
			return fail(err)
		}
	case op == 0xD0: // ref.null t
		if _, err := r.byte(); err != nil {
			return fail(err)
		}
	case op == opPrefixFC:
		sub, err := r.u32()
		if err != nil {
			return fail(err)
		}
		// Immediates of the 0xFC instructions, by sub-opcode: saturating conversions
		// (0-7) have none; memory.init, data.drop, memory.copy, memory.fill and the
		// table instructions have one or two indices.
		var n int
		switch {
		case sub <= 7:
		case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
			n = 2
		case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
			n = 1
		default:
			return fail(fmt.Errorf("unknown 0xFC sub-opcode %d", sub))
		}
		for ; n > 0; n-- {
			if _, err := r.u32(); err != nil {
				return fail(err)
			}
		}
	default:
		return fail(errors.New("unknown opcode: the fuel rewrite cannot prove it does not loop"))
	}
	in.end = r.off
	return in, nil
}

func appendU32(out []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func appendS64(out []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func appendName(out []byte, s string) []byte {
	out = appendU32(out, uint32(len(s)))
	return append(out, s...)
}
