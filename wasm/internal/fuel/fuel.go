package fuel

import (
	"bytes"
	"errors"
	"fmt"
)

// The names the instrumented module uses to reach its host.
const (
	// ImportModule and ImportName name the function the check calls when the fuel runs
	// out: (remaining i64) → (grant i64). remaining is the global's value (at most zero,
	// minus the overshoot of the last check); the answer becomes the new value.
	ImportModule = "libos"
	ImportName   = "fuel"
	// GlobalExport names the fuel counter, so that the host can set it before a call and
	// read what is left after it.
	GlobalExport = "libos_fuel"
)

// ErrInstrumented is returned by Instrument for a module that already has the check.
var ErrInstrumented = errors.New("fuel: module already instrumented")

const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10

	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
	kindTag    = 4

	valI32 = 0x7F
	valI64 = 0x7E
)

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

type section struct {
	id   byte
	body []byte
}

// order is a section's place in the binary format's mandated order (custom sections may
// appear anywhere and have none).
func order(id byte) int {
	switch id {
	case 1, 2, 3, 4, 5:
		return int(id)
	case 13: // tag
		return 6
	case 6, 7, 8, 9:
		return int(id) + 1
	case 12: // data count
		return 11
	case 10, 11:
		return int(id) + 2
	}
	return 0
}

func split(mod []byte) ([]section, error) {
	if !bytes.HasPrefix(mod, header) {
		return nil, errors.New("fuel: not a WebAssembly 1.0 binary")
	}
	r := &reader{b: mod, off: len(header)}
	var secs []section
	for r.off < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.bytes(int(n))
		if err != nil {
			return nil, fmt.Errorf("fuel: section %d: %w", id, err)
		}
		secs = append(secs, section{id, body})
	}
	return secs, nil
}

func join(secs []section) []byte {
	out := append([]byte(nil), header...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out
}

// find returns the index of the section with id, or where a new one must be inserted
// (and false).
func find(secs []section, id byte) (int, bool) {
	for i, s := range secs {
		if s.id == id {
			return i, true
		}
	}
	for i, s := range secs {
		if s.id != secCustom && order(s.id) > order(id) {
			return i, false
		}
	}
	return len(secs), false
}

func sectionBody(secs []section, id byte) []byte {
	if i, ok := find(secs, id); ok {
		return secs[i].body
	}
	return nil
}

func setSection(secs []section, id byte, body []byte) []section {
	i, ok := find(secs, id)
	if ok {
		secs[i].body = body
		return secs
	}
	return append(secs[:i], append([]section{{id, body}}, secs[i:]...)...)
}

// layout is what the rewrite needs to know about a module's index spaces.
type layout struct {
	importedFuncs   uint32
	importedGlobals uint32
	definedGlobals  uint32
	fuelType        uint32 // type index of (i64) → (i64)
	hasFuelType     bool
	params          []uint32 // parameter count of each type
	funcTypes       []uint32 // type index of each function the module defines
}

// Instrument returns mod with a fuel check at the start of every function body and every
// loop body, the fuel import and the exported fuel global (see the package comment). The
// output depends on mod alone: instrumenting the same bytes gives the same bytes.
//
// The import is added after the module's own function imports, so every function the
// module defines moves up by one index; calls, exports, the start function, element
// segments and ref.func are renumbered. A "name" custom section, which would name the
// wrong functions, is dropped.
func Instrument(mod []byte) ([]byte, error) {
	secs, err := split(mod)
	if err != nil {
		return nil, err
	}
	var lay layout

	// Types: find or add (i64) → (i64).
	types, err := rewriteTypes(sectionBody(secs, secType), &lay)
	if err != nil {
		return nil, err
	}
	secs = setSection(secs, secType, types)

	// Imports: count functions and globals, add ours last.
	imports, err := rewriteImports(sectionBody(secs, secImport), &lay)
	if err != nil {
		return nil, err
	}
	secs = setSection(secs, secImport, imports)
	if err := readFunctions(sectionBody(secs, secFunction), &lay); err != nil {
		return nil, err
	}
	fuelFunc := lay.importedFuncs // the new import's index, after the existing ones
	shift := func(idx uint32) uint32 {
		if idx >= fuelFunc {
			return idx + 1
		}
		return idx
	}

	globals, err := rewriteGlobals(sectionBody(secs, secGlobal), &lay, shift)
	if err != nil {
		return nil, err
	}
	secs = setSection(secs, secGlobal, globals)
	fuelGlobal := lay.importedGlobals + lay.definedGlobals

	exports, err := rewriteExports(sectionBody(secs, secExport), shift, fuelGlobal)
	if err != nil {
		return nil, err
	}
	secs = setSection(secs, secExport, exports)

	if i, ok := find(secs, secStart); ok {
		r := &reader{b: secs[i].body}
		idx, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("fuel: start section: %w", err)
		}
		secs[i].body = appendU32(nil, shift(idx))
	}

	if i, ok := find(secs, secElement); ok {
		body, err := rewriteElements(secs[i].body, shift)
		if err != nil {
			return nil, err
		}
		secs[i].body = body
	}

	i, ok := find(secs, secCode)
	if !ok {
		return nil, errors.New("fuel: module has no code section")
	}
	code, err := rewriteCode(secs[i].body, &lay, shift, fuelFunc, fuelGlobal)
	if err != nil {
		return nil, err
	}
	secs[i].body = code

	out := secs[:0]
	for _, s := range secs {
		if s.id == secCustom {
			name, _ := (&reader{b: s.body}).name()
			if name == "name" {
				continue
			}
		}
		out = append(out, s)
	}
	return join(out), nil
}

func rewriteTypes(body []byte, lay *layout) ([]byte, error) {
	r := &reader{b: body}
	var n uint32
	if body != nil {
		var err error
		if n, err = r.u32(); err != nil {
			return nil, fmt.Errorf("fuel: type section: %w", err)
		}
	}
	start := r.off
	for i := uint32(0); i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return nil, fmt.Errorf("fuel: type %d: %w", i, err)
		}
		lay.params = append(lay.params, 0)
		if form != 0x60 {
			return nil, fmt.Errorf("fuel: type %d: form 0x%02x is not a function type", i, form)
		}
		params, err := r.vecBytes()
		if err != nil {
			return nil, fmt.Errorf("fuel: type %d: %w", i, err)
		}
		results, err := r.vecBytes()
		if err != nil {
			return nil, fmt.Errorf("fuel: type %d: %w", i, err)
		}
		lay.params[i] = uint32(len(params))
		if !lay.hasFuelType && bytes.Equal(params, []byte{valI64}) && bytes.Equal(results, []byte{valI64}) {
			lay.fuelType, lay.hasFuelType = i, true
		}
	}
	if lay.hasFuelType {
		return body, nil
	}
	lay.fuelType, lay.hasFuelType = n, true
	out := appendU32(nil, n+1)
	out = append(out, body[start:]...)
	return append(out, 0x60, 1, valI64, 1, valI64), nil
}

func rewriteImports(body []byte, lay *layout) ([]byte, error) {
	r := &reader{b: body}
	var n uint32
	if body != nil {
		var err error
		if n, err = r.u32(); err != nil {
			return nil, fmt.Errorf("fuel: import section: %w", err)
		}
	}
	start := r.off
	for i := uint32(0); i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return nil, fmt.Errorf("fuel: import %d: %w", i, err)
		}
		name, err := r.name()
		if err != nil {
			return nil, fmt.Errorf("fuel: import %d: %w", i, err)
		}
		if mod == ImportModule && name == ImportName {
			return nil, ErrInstrumented
		}
		kind, err := r.byte()
		if err != nil {
			return nil, fmt.Errorf("fuel: import %d: %w", i, err)
		}
		switch kind {
		case kindFunc:
			_, err = r.u32()
			lay.importedFuncs++
		case kindTable:
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case kindMemory:
			err = r.limits()
		case kindGlobal:
			_, err = r.bytes(2)
			lay.importedGlobals++
		case kindTag:
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			err = fmt.Errorf("unknown kind %d", kind)
		}
		if err != nil {
			return nil, fmt.Errorf("fuel: import %s.%s: %w", mod, name, err)
		}
	}
	out := appendU32(nil, n+1)
	out = append(out, body[start:]...)
	out = appendName(out, ImportModule)
	out = appendName(out, ImportName)
	out = append(out, kindFunc)
	return appendU32(out, lay.fuelType), nil
}

func readFunctions(body []byte, lay *layout) error {
	if body == nil {
		return nil
	}
	r := &reader{b: body}
	n, err := r.u32()
	if err != nil {
		return fmt.Errorf("fuel: function section: %w", err)
	}
	for i := uint32(0); i < n; i++ {
		t, err := r.u32()
		if err != nil {
			return fmt.Errorf("fuel: function %d: %w", i, err)
		}
		if int(t) >= len(lay.params) {
			return fmt.Errorf("fuel: function %d: no type %d", i, t)
		}
		lay.funcTypes = append(lay.funcTypes, t)
	}
	return nil
}

func rewriteGlobals(body []byte, lay *layout, shift func(uint32) uint32) ([]byte, error) {
	r := &reader{b: body}
	var n uint32
	if body != nil {
		var err error
		if n, err = r.u32(); err != nil {
			return nil, fmt.Errorf("fuel: global section: %w", err)
		}
	}
	lay.definedGlobals = n
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n; i++ {
		typ, err := r.bytes(2)
		if err != nil {
			return nil, fmt.Errorf("fuel: global %d: %w", i, err)
		}
		out = append(out, typ...)
		if out, err = r.constExpr(out, shift); err != nil {
			return nil, fmt.Errorf("fuel: global %d: %w", i, err)
		}
	}
	// i64, mutable, initialised to 0: the first check of a call the host did not fuel
	// asks the host at once.
	return append(out, valI64, 0x01, 0x42, 0x00, 0x0B), nil
}

func rewriteExports(body []byte, shift func(uint32) uint32, fuelGlobal uint32) ([]byte, error) {
	r := &reader{b: body}
	var n uint32
	if body != nil {
		var err error
		if n, err = r.u32(); err != nil {
			return nil, fmt.Errorf("fuel: export section: %w", err)
		}
	}
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return nil, fmt.Errorf("fuel: export %d: %w", i, err)
		}
		if name == GlobalExport {
			return nil, fmt.Errorf("fuel: the module already exports %q", GlobalExport)
		}
		kind, err := r.byte()
		if err != nil {
			return nil, fmt.Errorf("fuel: export %q: %w", name, err)
		}
		idx, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("fuel: export %q: %w", name, err)
		}
		if kind == kindFunc {
			idx = shift(idx)
		}
		out = appendName(out, name)
		out = append(out, kind)
		out = appendU32(out, idx)
	}
	out = appendName(out, GlobalExport)
	out = append(out, kindGlobal)
	return appendU32(out, fuelGlobal), nil
}

func rewriteElements(body []byte, shift func(uint32) uint32) ([]byte, error) {
	r := &reader{b: body}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("fuel: element section: %w", err)
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		if out, err = rewriteElement(r, out, shift); err != nil {
			return nil, fmt.Errorf("fuel: element segment %d: %w", i, err)
		}
	}
	return out, nil
}

func rewriteElement(r *reader, out []byte, shift func(uint32) uint32) ([]byte, error) {
	flags, err := r.u32()
	if err != nil {
		return nil, err
	}
	if flags > 7 {
		return nil, fmt.Errorf("unknown flags %d", flags)
	}
	out = appendU32(out, flags)
	if flags&0b011 == 0b010 { // explicit table index
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = appendU32(out, idx)
	}
	if flags&0b001 == 0 { // active: an offset expression
		if out, err = r.constExpr(out, shift); err != nil {
			return nil, err
		}
	}
	if flags&0b011 != 0 { // an element kind or a reference type
		b, err := r.byte()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	count, err := r.u32()
	if err != nil {
		return nil, err
	}
	out = appendU32(out, count)
	for j := uint32(0); j < count; j++ {
		if flags&0b100 == 0 { // function indices
			idx, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, shift(idx))
		} else if out, err = r.constExpr(out, shift); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rewriteCode rewrites every function body.
func rewriteCode(body []byte, lay *layout, shift func(uint32) uint32, fuelFunc, fuelGlobal uint32) ([]byte, error) {
	r := &reader{b: body}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("fuel: code section: %w", err)
	}
	if int(n) != len(lay.funcTypes) {
		return nil, fmt.Errorf("fuel: %d function bodies for %d functions", n, len(lay.funcTypes))
	}
	out := appendU32(make([]byte, 0, len(body)+len(body)/4), n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("fuel: function body %d: %w", i, err)
		}
		b, err := r.bytes(int(size))
		if err != nil {
			return nil, fmt.Errorf("fuel: function body %d: %w", i, err)
		}
		params := lay.params[lay.funcTypes[i]]
		if fn, err = rewriteBody(fn[:0], b, params, shift, fuelFunc, fuelGlobal); err != nil {
			return nil, fmt.Errorf("fuel: function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	return out, nil
}

func rewriteBody(out, body []byte, params uint32, shift func(uint32) uint32, fuelFunc, fuelGlobal uint32) ([]byte, error) {
	r := &reader{b: body}
	groups, locals, err := r.localGroups()
	if err != nil {
		return nil, err
	}
	localsEnd := r.off
	insts, err := decodeExpr(r)
	if err != nil {
		return nil, err
	}
	// Every function gets an i64 local that holds the fuel while it runs (a register,
	// where the global would be a load and a store at every check), and an i32 scratch
	// for the bulk charge.
	f, scratch := params+locals, params+locals+1
	out = appendU32(out, groups+2)
	out = append(out, body[(&reader{b: body}).skipU32():localsEnd]...)
	out = append(out, 1, valI64, 1, valI32)
	out = appendSyncIn(out, f, fuelGlobal)
	out = appendCheck(out, runCost(insts, 0), f, fuelFunc)
	depth := 0
	for i, in := range insts {
		if isBulk(body, in) {
			out = appendBulkCharge(out, scratch, f)
		}
		if in.op == opCall || in.op == opCallInd || in.op == opReturn || exitsFunction(body, in, depth) ||
			(in.op == opEnd && depth == 0) {
			out = appendSyncOut(out, f, fuelGlobal)
		}
		switch in.op {
		case opCall:
			out = append(out, opCall)
			out = appendU32(out, shift(in.idx))
		case opRefFunc:
			out = append(out, opRefFunc)
			out = appendU32(out, shift(in.idx))
		default:
			out = append(out, body[in.start:in.end]...)
		}
		switch in.op {
		case opCall, opCallInd:
			out = appendSyncIn(out, f, fuelGlobal)
		case opLoop:
			out = appendCheck(out, runCost(insts, i+1), f, fuelFunc)
		}
		switch in.op {
		case opBlock, opLoop, opIf:
			depth++
		case opEnd:
			depth--
		}
	}
	return out, nil
}

// exitsFunction reports whether in, at block depth depth, is a branch that may leave the
// function (its label is the function body's).
func exitsFunction(body []byte, in inst, depth int) bool {
	switch in.op {
	case opBr, opBrIf:
		return in.idx == uint32(depth)
	case opBrTable:
		r := &reader{b: body[in.start+1 : in.end]}
		n, _ := r.u32()
		for i := uint32(0); i <= n; i++ {
			if l, _ := r.u32(); l == uint32(depth) {
				return true
			}
		}
	}
	return false
}

// appendSyncIn loads the fuel from the global into the local: at entry and after a call,
// which may have spent some and been granted more.
func appendSyncIn(out []byte, f, fuelGlobal uint32) []byte {
	out = append(out, opGlobalGet)
	out = appendU32(out, fuelGlobal)
	out = append(out, opLocalSet)
	return appendU32(out, f)
}

// appendSyncOut stores the local's fuel into the global: before a call and before every
// way out of the function.
func appendSyncOut(out []byte, f, fuelGlobal uint32) []byte {
	out = append(out, opLocalGet)
	out = appendU32(out, f)
	out = append(out, opGlobalSet)
	return appendU32(out, fuelGlobal)
}

// runCost is the number of instructions from insts[i] up to and including the first
// control instruction: the straight-line run every execution that reaches insts[i]
// performs. At least 1.
func runCost(insts []inst, i int) int64 {
	n := int64(0)
	for ; i < len(insts); i++ {
		n++
		if isControl(insts[i].op) {
			break
		}
	}
	return max(n, 1)
}

// BulkShift sets the charge of memory.copy and memory.fill: one unit per 2^BulkShift
// bytes, about what the same time costs in ordinary instructions. One such instruction
// can move megabytes, and a loop around it (a buffer that grows by insertion) would
// otherwise pay a few units per megabyte.
const BulkShift = 5

// isBulk reports whether in is memory.copy or memory.fill.
func isBulk(body []byte, in inst) bool {
	if in.op != opPrefixFC {
		return false
	}
	sub, err := (&reader{b: body[in.start+1 : in.end]}).u32()
	return err == nil && (sub == 10 || sub == 11)
}

// appendBulkCharge appends, before a memory.copy or memory.fill, the charge for its
// length (on top of the stack, kept there through the scratch local):
//
//	local.tee $n; local.get $fuel; local.get $n; i64.extend_i32_u;
//	i64.const BulkShift; i64.shr_u; i64.sub; local.set $fuel
//
// The charge may take the counter far below zero; the next check asks the host, which
// counts it.
func appendBulkCharge(out []byte, scratch, f uint32) []byte {
	out = append(out, opLocalTee)
	out = appendU32(out, scratch)
	out = append(out, opLocalGet)
	out = appendU32(out, f)
	out = append(out, opLocalGet)
	out = appendU32(out, scratch)
	out = append(out, opI64ExtendI32U, opI64Const, BulkShift, opI64ShrU, opI64Sub, opLocalSet)
	return appendU32(out, f)
}

// appendCheck appends the fuel check on the function's fuel local (see the package
// comment).
func appendCheck(out []byte, cost int64, f, fuelFunc uint32) []byte {
	out = append(out, opLocalGet)
	out = appendU32(out, f)
	out = append(out, opI64Const)
	out = appendS64(out, cost)
	out = append(out, opI64Sub, opLocalTee)
	out = appendU32(out, f)
	out = append(out, opI64Const, 0x00, opI64LtS, opIf, blockEmpty, opLocalGet)
	out = appendU32(out, f)
	out = append(out, opCall)
	out = appendU32(out, fuelFunc)
	out = append(out, opLocalSet)
	out = appendU32(out, f)
	return append(out, opEnd)
}
