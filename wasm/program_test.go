package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Programs whose results show what compiling to bytecode could lose or change: the
// source text of functions, stack traces with their line numbers, literals kept in the
// constant pool (regular expressions, BigInt, templates, nested functions), global
// declarations, and the failures of a compile.
var bytecodePrograms = []struct{ name, program string }{
	{"a plain call", sumProgram},
	{"Function.prototype.toString of every kind of function",
		`function run() { const f = (a, b) => a + b; class K { m() { return 1 } } async function* g() {}
		 return [run.toString(), f.toString(), K.toString(), K.prototype.m.toString(), g.toString(), String(function () { /* c */ })]; }`},
	{"stack traces and line numbers",
		`function inner() {
		   throw new Error("deep");
		 }
		 function run() { try { inner(); } catch (e) { return [e.message, e.stack]; } }`},
	{"an uncaught error", "function run() {\n  null.x;\n}"},
	{"literals in the constant pool",
		"function run() { const t = (s, ...v) => s.raw.join('|') + v.join(); return [/a(b+)c/gi.exec('xABBCy'), String(2n ** 70n), t`x${1}y${2}z`, 0.1 + 0.2, 'é\\u{1F600}', [1, [2, [3]]]]; }"},
	{"var, let, const and class bindings", `var a = 1; let b = 2; const c = 3; class D { static x = 4 } const run = () => [a, b, c, D.x, typeof globalThis.a, typeof globalThis.b];`},
	{"async run and await", `async function run(args, libos) { await null; return [await Promise.all([1, Promise.resolve(2)])]; }`},
	{"strict mode", `"use strict"; function run() { try { undeclared = 1; return "sloppy"; } catch (e) { return e.name; } }`},
	{"a syntax error", "function run() {\n  return 1 +;\n}"},
	{"no run", `function walk() { return 1; }`},
	{"a program that throws while defining run", `throw new TypeError("early"); function run() {}`},
	{"eval is absent", `function run() { return typeof eval; }`},
}

// "QuickJS bytecode compiled once per candidate / registered tool and reused by every
// test and call", with the results identical: the guest runs each program two ways, from
// its text in one call (as every call did before the bytecode) and compiled by
// libos_compile then run from the bytecode in a fresh state, and both answer the same
// bytes.
func TestBytecodeRunsLikeTheSource(t *testing.T) {
	h := newBareHost(t)
	for _, tc := range bytecodePrograms {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus, want := h.run(t, tc.program)
			gotStatus, got := h.runCompiled(t, tc.program)
			if gotStatus != wantStatus || got != want {
				t.Fatalf("from bytecode: status %d %s\nfrom the text: status %d %s", gotStatus, got, wantStatus, want)
			}
		})
	}
}

// The Engine compiles a program once and runs every later call from the bytecode, and a
// call's result, console lines and fuel are the same whether its program was compiled
// for it or taken from the cache, and the same as on a fresh Engine.
func TestBytecodeCachedPerProgram(t *testing.T) {
	e := newHostTestEngine(t, Config{PoolSize: 1})
	for _, tc := range bytecodePrograms {
		t.Run(tc.name, func(t *testing.T) {
			fresh := newHostTestEngine(t, Config{PoolSize: 1})
			want := outcome(fresh.Run(hostCtx(t), tc.program, nil, nil, Options{Seed: 3}))
			before := e.programs.compiles.Load()
			for i := 0; i < 3; i++ {
				got := outcome(e.Run(hostCtx(t), tc.program, nil, nil, Options{Seed: 3}))
				if got != want {
					t.Fatalf("call %d: %s\non a fresh Engine: %s", i+1, got, want)
				}
			}
			compiles := e.programs.compiles.Load() - before
			if strings.Contains(want, `"Code":"syntax_error"`) && compiles != 3 {
				t.Errorf("a program that fails to compile was compiled %d times in 3 calls, want 3 (a failure is not kept)", compiles)
			}
			if !strings.Contains(want, `"Code":"syntax_error"`) && compiles != 1 {
				t.Errorf("the program was compiled %d times in 3 calls, want once", compiles)
			}
		})
	}
}

// outcome renders what a call answered, with its fuel, for comparison: all but the
// duration and the size of the memory.
func outcome(res *Result, err error) string {
	if res != nil {
		// The memory is the instance's, which earlier calls may have grown.
		res.Stats.Duration, res.Stats.PeakMemory = 0, 0
	}
	b, _ := json.Marshal(res)
	var we *Error
	if errors.As(err, &we) {
		e, _ := json.Marshal(we)
		return string(b) + " error " + string(e)
	}
	if err != nil {
		return string(b) + " error " + err.Error()
	}
	return string(b)
}

// "Limits.Fuel ... the same count for the same program and arguments on every machine":
// the fuel of the compile is counted to every call that runs its bytecode, so that a
// budget stops a call at the same point, with the same error, whether or not the program
// was compiled before, and a budget too small for the compile alone fails as it would
// have on a fresh Engine.
func TestBytecodeFuelDoesNotDependOnTheCache(t *testing.T) {
	const program = `function run() { let s = 0; for (let i = 0; i < 20000; i++) s += i; return s; }`
	probe := newHostTestEngine(t, Config{PoolSize: 1})
	full, err := probe.Run(hostCtx(t), program, nil, nil, Options{Seed: 1, Limits: Limits{Fuel: 1 << 40}})
	if err != nil {
		t.Fatal(err)
	}
	// The fuel of the compile alone, from a program with the same text and a run that
	// does nothing: the compile is the bulk of it.
	compileOnly := probe.programs.fuelOf(probe.programKey(program, probe.resolve(Limits{})))
	if compileOnly <= 0 || compileOnly >= full.Stats.Fuel {
		t.Fatalf("compile fuel %d, whole call %d", compileOnly, full.Stats.Fuel)
	}
	for _, budget := range []int64{compileOnly / 2, compileOnly + (full.Stats.Fuel-compileOnly)/2, full.Stats.Fuel * 2} {
		want := outcome(newHostTestEngine(t, Config{PoolSize: 1}).Run(hostCtx(t), program, nil, nil, Options{Seed: 1, Limits: Limits{Fuel: budget}}))
		for i := 0; i < 2; i++ {
			if got := outcome(probe.Run(hostCtx(t), program, nil, nil, Options{Seed: 1, Limits: Limits{Fuel: budget}})); got != want {
				t.Fatalf("budget %d, call %d on a warm Engine: %s\non a fresh Engine: %s", budget, i+1, got, want)
			}
		}
	}
}

// The memory and stack limits decide whether a program compiles, so they are part of the
// key: a program compiled under a large stack limit still fails under a small one.
func TestBytecodeKeyedByLimits(t *testing.T) {
	// What is checked is the stack limit, not the time: the parse of 1,500 nested
	// arrays under the largest stack can take longer than the default wall time on a
	// machine busy with other builds, so the wall time is generous here.
	program := "function run() { return " + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + "; }"
	e := newHostTestEngine(t, Config{PoolSize: 1})
	if _, err := e.Run(hostCtx(t), program, nil, nil, Options{Limits: Limits{Stack: maxStack, WallTime: time.Minute}}); err != nil {
		t.Fatalf("under the largest stack: %v", err)
	}
	_, err := e.Run(hostCtx(t), program, nil, nil, Options{Limits: Limits{Stack: 32 << 10, WallTime: time.Minute}})
	// The parser's own overflow is a SyntaxError.
	if we := wantError(t, err, CodeSyntaxError, ""); !strings.Contains(we.Message, "stack overflow") {
		t.Fatalf("under a small stack: %v, want the parser's stack overflow", err)
	}
	want := outcome(newHostTestEngine(t, Config{PoolSize: 1}).Run(hostCtx(t), program, nil, nil, Options{Limits: Limits{Stack: 32 << 10, WallTime: time.Minute}}))
	if got := outcome(e.Run(hostCtx(t), program, nil, nil, Options{Limits: Limits{Stack: 32 << 10, WallTime: time.Minute}})); got != want {
		t.Fatalf("warm: %s\nfresh: %s", got, want)
	}
}

// runCompiled compiles program with libos_compile, brings back a fresh state
// (libos_prepare), and runs the bytecode with {} as its arguments.
func (h *bareHost) runCompiled(t *testing.T, program string) (int32, string) {
	t.Helper()
	ctx, mod := context.Background(), h.mod
	src := h.write(t, program)
	r, err := mod.ExportedFunction("libos_compile").Call(ctx, src, uint64(len(program)), 32<<20, 0)
	if err != nil {
		t.Fatalf("libos_compile trapped: %v", err)
	}
	out := h.output(t)
	if r[0] != 0 {
		// The compile's error is what the call reports.
		mod.ExportedFunction("libos_prepare").Call(ctx)
		return int32(r[0]), out
	}
	if p, err := mod.ExportedFunction("libos_prepare").Call(ctx); err != nil || int32(p[0]) < 0 {
		t.Fatalf("libos_prepare: %v %v", p, err)
	}
	bc := h.write(t, out)
	args := h.write(t, "{}")
	r, err = mod.ExportedFunction("libos_run").Call(ctx, bc, uint64(len(out)), args, 2, 32<<20, 0, 1, runBytecode)
	if err != nil {
		t.Fatalf("libos_run trapped: %v", err)
	}
	return int32(r[0]), h.output(t)
}
