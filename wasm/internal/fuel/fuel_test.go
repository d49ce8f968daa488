package fuel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// A small module assembled by hand, so that the expected fuel can be counted on paper:
//
//	(import "x" "one" (func (result i32)))                       ;; only with an import
//	(table 1 funcref) (elem (i32.const 0) $count)
//	(memory 1)
//	(func $count (param i32) (result i32) (local i32)
//	  loop  local.get 0  i32.const 1  i32.sub  local.tee 0  br_if 0  end
//	  local.get 0)
//	(func $run (export "run") (result i32)  i32.const 100  call $count)
//	(func $indirect (export "indirect") (result i32)  i32.const 10  i32.const 0  call_indirect (param i32) (result i32))
//	(func $copy (export "copy")  i32.const 0  i32.const 100  i32.const 6400  memory.copy)
func testModule(withImport bool) []byte {
	sec := func(id byte, parts ...[]byte) []byte {
		body := bytes.Join(parts, nil)
		return append(appendU32([]byte{id}, uint32(len(body))), body...)
	}
	vec := func(items ...[]byte) []byte {
		return append(appendU32(nil, uint32(len(items))), bytes.Join(items, nil)...)
	}
	fn := func(locals []byte, code ...byte) []byte {
		body := append(append([]byte(nil), locals...), code...)
		return append(appendU32(nil, uint32(len(body))), body...)
	}
	imported := uint32(0)
	var imports []byte
	if withImport {
		imports = sec(secImport, vec(append(append(appendName(nil, "x"), appendName(nil, "one")...), kindFunc, 0)))
		imported = 1
	}
	count, run, indirect, copyFn := imported, imported+1, imported+2, imported+3
	export := func(name string, idx uint32) []byte {
		return appendU32(append(appendName(nil, name), kindFunc), idx)
	}
	mod := append([]byte(nil), header...)
	mod = append(mod, sec(secType, vec([]byte{0x60, 0, 1, valI32}, []byte{0x60, 1, valI32, 1, valI32}, []byte{0x60, 0, 0}))...)
	mod = append(mod, imports...)
	mod = append(mod, sec(secFunction, vec([]byte{1}, []byte{0}, []byte{0}, []byte{2}))...)
	mod = append(mod, sec(4, vec([]byte{0x70, 0, 1}))...) // table
	mod = append(mod, sec(5, vec([]byte{0, 1}))...)       // memory
	mod = append(mod, sec(secExport, vec(export("run", run), export("indirect", indirect), export("copy", copyFn)))...)
	mod = append(mod, sec(secElement, vec(append([]byte{0, 0x41, 0, opEnd}, vec(appendU32(nil, count))...)))...)
	mod = append(mod, sec(secCode, vec(
		fn([]byte{1, 1, valI32}, opLoop, blockEmpty, 0x20, 0, 0x41, 1, 0x6B, 0x22, 0, opBrIf, 0, opEnd, 0x20, 0, opEnd),
		fn([]byte{0}, append(append([]byte{0x41, 0xE4, 0x00, opCall}, appendU32(nil, count)...), opEnd)...),
		fn([]byte{0}, 0x41, 10, 0x41, 0, opCallInd, 1, 0, opEnd),
		fn([]byte{0}, 0x41, 0, 0x41, 0xE4, 0x00, 0x41, 0x80, 0x32, opPrefixFC, 10, 0, 0, opEnd),
	))...)
	return mod
}

// run instantiates the instrumented module with a host fuel import that grants grant
// units at a time, calls export and returns the fuel spent and how often the host was
// asked.
func runFuel(t *testing.T, mod []byte, export string, grant int64) (spent int64, polls int, result uint64) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	var granted int64
	_, err := rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			remaining := int64(stack[0])
			if remaining >= 0 {
				t.Errorf("the host was asked for fuel with %d left", remaining)
			}
			spent += granted - remaining
			polls++
			granted = grant
			stack[0] = uint64(grant)
		}), []api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).
		Export(ImportName).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewHostModuleBuilder("x").NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) { stack[0] = 1 }), nil, []api.ValueType{api.ValueTypeI32}).
		Export("one").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, mod)
	if err != nil {
		t.Fatal(err)
	}
	g := m.ExportedGlobal(GlobalExport).(api.MutableGlobal)
	g.Set(uint64(grant))
	granted = grant
	res, err := m.ExportedFunction(export).Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spent += granted - int64(g.Get())
	if len(res) > 0 {
		result = res[0]
	}
	return spent, polls, result
}

// "a fuel counter decremented at every loop header and function entry, calling the host's
// poll when it runs out": the count of a run is the sum, over every function entry and
// loop iteration, of the straight-line run that starts there, and it is the same however
// the host slices it.
func TestInstrumentCountsEveryLoopAndCall(t *testing.T) {
	for _, withImport := range []bool{false, true} {
		inst, err := Instrument(testModule(withImport))
		if err != nil {
			t.Fatal(err)
		}
		cov, err := Check(inst)
		if err != nil {
			t.Fatal(err)
		}
		if cov != (Coverage{Functions: 4, Loops: 1, Bulk: 1}) {
			t.Errorf("coverage %+v, want 4 functions, 1 loop, 1 bulk instruction", cov)
		}
		// run: its entry (i32.const, call: 2), count's entry (loop: 1), 100 iterations
		// of 5 instructions.
		const want = 2 + 1 + 100*5
		for _, grant := range []int64{1 << 40, 64, 1} {
			spent, polls, result := runFuel(t, inst, "run", grant)
			if spent != want || result != 0 {
				t.Errorf("import=%v grant %d: spent %d, returned %d; want %d and 0", withImport, grant, spent, result, want)
			}
			if grant == 1 && polls < 100 {
				t.Errorf("grant 1: the host was asked %d times, want at least once per iteration", polls)
			}
		}
		// The table still holds count, renumbered: 3 + 1 + 10*5.
		if spent, _, _ := runFuel(t, inst, "indirect", 1<<40); spent != 3+1+10*5 {
			t.Errorf("import=%v indirect: spent %d, want %d", withImport, spent, 3+1+10*5)
		}
		// memory.copy of 6400 bytes pays 6400>>BulkShift on top of its function's entry
		// (three constants, the copy, end).
		if spent, _, _ := runFuel(t, inst, "copy", 1<<40); spent != 5+6400>>BulkShift {
			t.Errorf("import=%v copy: spent %d, want %d", withImport, spent, 5+6400>>BulkShift)
		}
	}
}

// "do it as a deterministic build step ... the build must stay byte-reproducible".
func TestInstrumentIsDeterministicAndRefusesItsOutput(t *testing.T) {
	a, err := Instrument(testModule(true))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Instrument(testModule(true))
	if !bytes.Equal(a, b) {
		t.Error("two rewrites of the same module differ")
	}
	if _, err := Instrument(a); !errors.Is(err, ErrInstrumented) {
		t.Errorf("instrumenting an instrumented module: %v, want ErrInstrumented", err)
	}
}

// Check fails on a module that is not instrumented, on a loop whose check was removed
// and on an opcode it cannot decode.
func TestCheckRefusesUncoveredCode(t *testing.T) {
	if _, err := Check(testModule(true)); err == nil {
		t.Error("Check passed a module without the fuel import")
	}
	inst, err := Instrument(testModule(false))
	if err != nil {
		t.Fatal(err)
	}
	// Drop the check that follows the loop: find "loop, empty" then the check's bytes.
	i := bytes.Index(inst, []byte{opLoop, blockEmpty, opLocalGet})
	if i < 0 {
		t.Fatal("no loop in the instrumented module")
	}
	broken := bytes.Clone(inst)
	broken[i+2] = 0x01 // nop over the check's first instruction
	if _, err := Check(broken); err == nil {
		t.Error("Check passed a loop without its check")
	}
	simd := bytes.Clone(inst)
	simd[i+2] = 0xFD
	if _, err := Check(simd); err == nil {
		t.Error("Check passed an opcode it does not know")
	}
}

// The committed guest is the instrumented one: every function and every loop of it
// checks its fuel (the build runs Instrument; this proves the result).
func TestGuestIsInstrumented(t *testing.T) {
	mod, err := os.ReadFile("../../libos_guest.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cov, err := Check(mod)
	if err != nil {
		t.Fatal(err)
	}
	if cov.Functions < 500 || cov.Loops < 500 {
		t.Errorf("coverage %+v: far fewer functions and loops than QuickJS has", cov)
	}
	t.Logf("%d functions, %d loops, %d bulk memory instructions", cov.Functions, cov.Loops, cov.Bulk)
}
