package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/tetratelabs/wazero/api"

	"github.com/agentlibos/libos/liberr"
)

// Syscaller is supplied by the caller: the syscall router in production, a tape in
// validation. The guest's libos.syscall(name, args) reaches it with args as JSON text; the
// result must be JSON. Return a *liberr.Error (possibly wrapped) to reject the guest's
// Promise with its code and message; any other error reaches the guest only as the generic
// CodeSyscallFailed. Syscall must return when ctx is done: ctx ends at the call's wall-time
// deadline or when the caller cancels, and Run cannot return before Syscall does.
type Syscaller interface {
	Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

// ExactSyscaller is a Syscaller that takes a syscall's arguments as the host decoded
// them. The host parses every syscall's arguments once, exactly (internal/jsonexact),
// where they leave the guest; when they are exact JSON it calls SyscallExact with
// that decoding, value, beside the text as the guest sent it, args, so that the
// Syscaller checks and reads them without parsing them again. Arguments that are JSON
// but not exact JSON still reach Syscall, as text.
type ExactSyscaller interface {
	Syscaller
	SyscallExact(ctx context.Context, name string, args json.RawMessage, value jsonexact.Value) (json.RawMessage, error)
}

// Default limits, used for each zero field of Limits.
const (
	DefaultWallTime     = 2 * time.Second
	DefaultStack        = 512 << 10
	DefaultOutputBytes  = 1 << 20
	DefaultLogBytes     = 64 << 10
	DefaultSyscalls     = 100
	DefaultSyscallBytes = 1 << 20

	// maxStack keeps QuickJS's own stack check inside the guest's 1 MiB stack, with room
	// for the C frames that run past the check, so that deep recursion is a JavaScript
	// error rather than a trap. The guest clamps to the same bound.
	maxStack = 1<<20 - 128<<10
)

// Limits bound one call. A zero field means its default; a limit that is hit ends the call
// with an *Error of code CodeLimitExceeded whose *Fault names it in Limit.
type Limits struct {
	// WallTime is the real time the call may take, syscalls included. Default 2 s.
	WallTime time.Duration
	// Memory is QuickJS's graceful heap limit in bytes: allocations beyond it fail with
	// a JavaScript out-of-memory error. Default three quarters of the Engine's MaxMemory,
	// capped at MaxMemory. The Engine's MaxMemory is the hard cap behind it.
	Memory int64
	// Stack is QuickJS's stack limit in bytes. Default 512 KiB; the guest keeps it
	// within [32 KiB, 896 KiB] of its 1 MiB stack.
	Stack int
	// OutputBytes bounds the JSON text of the returned value. Default 1 MiB.
	OutputBytes int
	// LogBytes bounds the captured console output; each line counts its bytes plus one.
	// Default 64 KiB.
	LogBytes int
	// Syscalls bounds how many syscalls one call may make. Default 100.
	Syscalls int
	// SyscallBytes bounds the JSON arguments of each syscall and each result. Default 1 MiB.
	SyscallBytes int
	// Fuel bounds the guest work the call may do, counted by the fuel checks compiled
	// into the guest (at every function entry and loop iteration, the instructions of
	// the straight-line run that follows): the same count for the same program and
	// arguments on every machine, under any load. 0 means no such bound; the wall time
	// applies either way. Validation sets it so that a verdict never depends on the
	// machine; production calls keep the wall time alone.
	Fuel int64
}

// Options configure one call.
type Options struct {
	Limits Limits
	// Seed seeds Math.random. 0 means a fresh random seed for this call; any other value
	// makes Math.random's sequence reproducible.
	Seed uint64
	// Defer, when set, is handed the work that brings the call's instance back to the
	// snapshot and returns it to the pool, instead of Run doing it before it returns.
	// The work only starts a goroutine that does it, so the caller runs it when a core
	// is likely free for it (the kernel: when the call's settlement is applied and its
	// sync about to be asked for, so that the restore runs while the disk syncs).
	// Until the work is run and done the instance stays out of the pool, so no call
	// starts on what this one left; a call that finds the pool empty waits for such a
	// restore rather than instantiating the guest again, and Close waits for them.
	// Nothing Run returns refers to the instance's memory.
	Defer func(restore func())

	// noPoll: see call.noPoll. Only tests and benchmarks set it.
	noPoll bool
}

// Result is what a call produced.
type Result struct {
	// Value is the JSON text of run's return value, byte for byte as the guest's
	// JSON.stringify wrote it. Nil when the call failed.
	Value json.RawMessage
	// Doc is Value as the one exact decoding of the guest's output (internal/
	// jsonexact), made where it crosses the boundary, so that the caller hands the
	// value on instead of parsing the text again. It is the zero Doc when Value is
	// JSON but not exact JSON (a repeated key, a lone surrogate escape, invalid
	// UTF-8): the caller's own exact check then refuses Value with its own error.
	Doc jsonexact.Doc
	// Logs are the console lines, in order, up to Limits.LogBytes.
	Logs []Log
	// LogsTruncated is set when the logs reached Limits.LogBytes (the call then failed).
	LogsTruncated bool
	Stats         Stats
}

// Log is one console line. Level is "debug", "info" (console.log and console.info),
// "warn" or "error".
type Log struct {
	Level   string
	Message string
}

// Stats describe one call.
type Stats struct {
	Duration time.Duration
	Syscalls int
	// PeakMemory is the size of the instance's linear memory when the call ended. Wasm
	// memory never shrinks, so it bounds the call's peak from above.
	PeakMemory int64
	// Fuel is the guest work the call did, in the unit of Limits.Fuel: deterministic
	// for a call that was not stopped by time or by its caller. For a call that ended
	// in a trap it counts up to the guest's last request for fuel.
	Fuel int64
}

func (e *Engine) resolve(l Limits) Limits {
	if l.WallTime <= 0 {
		l.WallTime = DefaultWallTime
	}
	if l.Memory <= 0 {
		l.Memory = e.maxMemory / 4 * 3
	}
	if l.Memory > e.maxMemory {
		l.Memory = e.maxMemory
	}
	if l.Stack <= 0 {
		l.Stack = DefaultStack
	}
	if l.Stack > maxStack {
		l.Stack = maxStack
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.LogBytes <= 0 {
		l.LogBytes = DefaultLogBytes
	}
	if l.Syscalls <= 0 {
		l.Syscalls = DefaultSyscalls
	}
	if l.SyscallBytes <= 0 {
		l.SyscallBytes = DefaultSyscallBytes
	}
	return l
}

// Run runs program, a JavaScript script that defines a function run, as
// run(JSON.parse(args), libos) in a JavaScript runtime and context that no earlier call
// touched (the instance's memory is restored to the prepared snapshot after every call,
// not rebuilt), awaiting the result when run is async. args must be exact JSON
// (internal/jsonexact: valid UTF-8, no lone surrogate escape, no repeated key, nesting
// within jsonexact.DefaultMaxDepth) holding an object, else the call fails with
// CodeArgsInvalid before the program runs; nil or empty means {}. sys
// receives the guest's syscalls; nil makes every syscall reject with CodeUnknownSyscall.
//
// A failure of the program (it does not parse, throws, returns something that is not
// JSON, hits a limit, traps) is an *Error; the Result is then still returned, with no
// Value but with the logs and stats gathered so far. Other errors (ErrClosed, a guest
// that cannot be instantiated) come with a nil Result.
func (e *Engine) Run(ctx context.Context, program string, args json.RawMessage, sys Syscaller, opts Options) (*Result, error) {
	res, _, err := e.run(ctx, program, args, nil, sys, opts)
	return res, err
}

// RunDoc is Run for arguments that are a jsonexact.Doc: exact JSON already (the kernel
// decoded them), so they are not checked as JSON again, only for being an object and
// for numbers the guest would see changed (CodeNumberInexact), found by walking the
// decoded value. The zero Doc means {}.
func (e *Engine) RunDoc(ctx context.Context, program string, args jsonexact.Doc, sys Syscaller, opts Options) (*Result, error) {
	if args.IsZero() {
		res, _, err := e.run(ctx, program, nil, nil, sys, opts)
		return res, err
	}
	res, _, err := e.run(ctx, program, args.Bytes(), &args, sys, opts)
	return res, err
}

// run is Run that also hands back the call's state, for benchmarks that report on it.
// run runs program; doc, when not nil, is args as a jsonexact.Doc (RunDoc).
func (e *Engine) run(ctx context.Context, program string, args json.RawMessage, doc *jsonexact.Doc, sys Syscaller, opts Options) (*Result, *call, error) {
	start := time.Now()
	if !e.enter() {
		return nil, nil, fmt.Errorf("wasm: run: %w", ErrClosed)
	}
	defer e.inflight.Done()

	lim := e.resolve(opts.Limits)
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res := &Result{}
	// The arguments reach the guest as text, which its JSON.parse reads leniently (the
	// last of two equal keys wins, a lone surrogate escape becomes a string no UTF-8
	// text holds): they are decoded here exactly, as the kernel decodes a call's, so
	// that the program sees the value its caller checked and recorded. A Doc is exact
	// JSON by construction and is not parsed again.
	var argv jsonexact.Value
	if doc != nil {
		argv = doc.Value()
	} else {
		v, derr := jsonexact.Decode(args, maxArgsDepth)
		if derr != nil {
			return res, nil, asError(&Fault{Code: CodeArgsInvalid, Message: "arguments are not exact JSON: " + liberr.Clip(derr.Error(), maxErrorText)})
		}
		argv = v
	}
	if argv.Kind != jsonexact.Object {
		return res, nil, asError(&Fault{Code: CodeArgsInvalid, Message: "arguments must be a JSON object, got " + argv.Kind.String()})
	}
	if ptr, num, became, bad := jsonexact.InexactValue(argv, args); bad {
		return res, nil, asError(inexactError("arguments", ptr, num, became))
	}
	if ctx.Err() != nil {
		return res, nil, asError(&Fault{Code: CodeCanceled, Message: "context done before the call started"})
	}

	in, err := e.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer e.release(context.WithoutCancel(ctx), in, opts.Defer)

	runCtx, cancel := context.WithTimeout(ctx, lim.WallTime)
	defer cancel()
	c := &call{ctx: runCtx, parent: ctx, sys: sys, lim: lim, noPoll: opts.noPoll,
		deadline: time.Since(monoBase) + lim.WallTime, fuelBudget: max(lim.Fuel, 0)}
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < lim.WallTime {
			c.deadline, c.parentDeadline = time.Since(monoBase)+left, true
		}
	}
	stopTimer := context.AfterFunc(runCtx, func() { c.halt(c.ctxReason()) })
	defer stopTimer()

	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	gerr := e.call(context.WithValue(runCtx, callKey{}, c), in, c, program, args, lim, seed, res)
	res.Logs, res.LogsTruncated = c.logs, c.logsTruncated
	res.Stats = Stats{Duration: time.Since(start), Syscalls: min(c.syscalls, lim.Syscalls), PeakMemory: int64(in.mem.Size()), Fuel: c.fuelUsed}
	if gerr != nil {
		res.Value = nil
		return res, c, asError(gerr)
	}
	return res, c, nil
}

// call runs the program on the instance, from its bytecode (program.go), and fills
// res.Value, or returns the *Error.
func (e *Engine) call(ctx context.Context, in *instance, c *call, program string, args []byte, lim Limits, seed uint64, res *Result) (err error) {
	defer func() {
		if r := recover(); r != nil {
			in.broken = true
			err = &Fault{Code: CodeTrap, Message: fmt.Sprintf("host panic: %v", r)}
		}
	}()
	bytecode, compileFuel, err := e.bytecode(ctx, in, c, program, lim)
	if err != nil {
		return err
	}
	// The bytecode and the arguments need no freeing: the snapshot is restored after
	// the call (or the instance closed).
	in.dirty = true
	src, err := in.write(ctx, bytecode)
	if err != nil {
		return err
	}
	argp, err := in.write(ctx, args)
	if err != nil {
		return err
	}
	st := in.stack[:]
	st[0], st[1] = uint64(src), uint64(len(bytecode))
	st[2], st[3] = uint64(argp), uint64(len(args))
	// mem_limit is a signed i32: a cap of 2 GiB or more leaves QuickJS's limit just
	// below 2 GiB, and the page limit stays the hard cap.
	st[4], st[5] = uint64(min(lim.Memory, math.MaxInt32)), uint64(lim.Stack)
	st[6] = seed
	st[7] = runRestore | runBytecode
	status, err := in.guestCall(ctx, c, compileFuel, in.run, st)
	if err != nil {
		return err
	}
	// A result is measured before it is copied: one over the bound stays in the
	// guest's memory, which the restore discards, and never costs the host its size.
	bound := math.MaxInt
	if status == 0 {
		bound = lim.OutputBytes
	}
	out, n, err := in.output(ctx, bound)
	if err != nil {
		return err
	}
	switch status {
	case 0:
		if n > lim.OutputBytes {
			return &Fault{Code: CodeLimitExceeded, Limit: LimitOutput,
				Message: fmt.Sprintf("result is %d bytes of JSON, over the limit of %d", n, lim.OutputBytes)}
		}
		// The guest's output is untrusted and is parsed once, here: exactly, so that
		// the caller gets the value (Result.Doc). What is not JSON at all is a broken
		// guest, as ever; JSON that is only not exact goes up as text for the caller to
		// refuse.
		doc, derr := jsonexact.DecodeDoc(out, maxOutputDepth)
		var je *jsonexact.Error
		if derr != nil && (!errors.As(derr, &je) || je.Problem != jsonexact.DuplicateKey && je.Problem != jsonexact.InvalidUTF8) {
			in.broken = true
			return &Fault{Code: CodeTrap, Message: "guest produced a result that is not JSON"}
		}
		res.Value, res.Doc = json.RawMessage(out), doc
		return nil
	case 1:
		return guestError(c, in, out)
	default:
		in.broken = true
		return &Fault{Code: CodeTrap, Message: fmt.Sprintf("guest returned unknown status %d", status)}
	}
}

// maxArgsDepth bounds the nesting of arguments given as text: the bound of every
// other JSON the guest boundary carries (syscall arguments, tapes). The kernel's own
// bound (engine.Limits.MaxDepth) is tighter by default.
const maxArgsDepth = jsonexact.DefaultMaxDepth

// maxOutputDepth bounds the nesting of a guest's output: encoding/json's own bound,
// which json.Valid applied before the output was decoded exactly.
const maxOutputDepth = 10_000

// libos_run's flags (ABI.md): runRestore says that the host restores the snapshot after
// the call, so the guest leaves its state as the call left it; runBytecode that the
// program is bytecode that libos_compile wrote.
const (
	runRestore  = 1
	runBytecode = 2
)

// bytecode returns the program's bytecode: from the Engine's cache, or compiled on this
// instance (which is then restored for the run). Either way the call is charged the fuel
// of the compile, so that its count and its verdict under Limits.Fuel never depend on
// what ran before it.
func (e *Engine) bytecode(ctx context.Context, in *instance, c *call, program string, lim Limits) (bytecode []byte, fuel int64, err error) {
	k := e.programKey(program, lim)
	p, owner := e.programs.lookup(ctx, k)
	if p != nil && !owner && (c.fuelBudget == 0 || p.fuel < c.fuelBudget) {
		return p.bytecode, p.fuel, nil
	}
	if owner {
		defer func() { e.programs.finish(k, p, bytecode, fuel, err == nil) }()
	}
	in.dirty = true
	src, err := in.write(ctx, []byte(program))
	if err != nil {
		return nil, 0, err
	}
	st := in.stack[:4]
	st[0], st[1] = uint64(src), uint64(len(program))
	st[2], st[3] = uint64(min(lim.Memory, math.MaxInt32)), uint64(lim.Stack)
	status, err := in.guestCall(ctx, c, 0, in.compile, st)
	if err != nil {
		return nil, 0, err
	}
	out, _, err := in.output(ctx, math.MaxInt)
	if err != nil {
		return nil, 0, err
	}
	if status != 0 {
		return nil, 0, guestError(c, in, out)
	}
	if !e.restore(in) {
		in.broken = true
		return nil, 0, &Fault{Code: CodeTrap, Message: "cannot restore the snapshot after the compile"}
	}
	return out, c.fuelUsed, nil
}

// guestCall calls fn, libos_compile or libos_run, with the call's fuel and returns its
// status, or the *Error of a call that trapped or was stopped. The fuel is counted from
// spent on: the host's own calls into the guest (write, output) run on fuelIdle and are
// not the program's.
func (in *instance) guestCall(ctx context.Context, c *call, spent int64, fn api.Function, st []uint64) (int32, error) {
	c.fuelUsed, c.fuelGrant = spent, 0
	c.fuelGrant = c.nextGrant()
	if in.fuel != nil {
		in.fuel.Set(uint64(c.fuelGrant))
	}
	callErr := fn.CallWithStack(ctx, st)
	// The guest keeps the counter in a local of each function and stores it in the
	// global on every way out: after a return the global is exact; after a trap it may
	// be stale, and the count stays at what the last request for fuel reported.
	if in.fuel != nil && callErr == nil {
		c.fuelUsed += c.fuelGrant - int64(in.fuel.Get())
	}
	c.fuelGrant = 0
	if callErr != nil {
		in.broken = true
		return 0, trapError(c, in, callErr)
	}
	// A stop the guest did not get to see (a log over the limit on the last line, a
	// fault in syscall_take) still fails the call.
	if r := c.stopped(); r != running {
		// Whatever QuickJS was doing when it unwound, the snapshot restored after the
		// call gives the next call a clean instance; a fault means the host gave up on
		// this one.
		if r == stopFault {
			in.broken = true
		}
		return 0, stopError(c, r)
	}
	return api.DecodeI32(st[0]), nil
}

// write copies b into memory the guest allocated for it.
func (in *instance) write(ctx context.Context, b []byte) (uint32, error) {
	in.idleFuel()
	st := in.stack[:1]
	st[0] = uint64(len(b))
	if err := in.alloc.CallWithStack(ctx, st); err != nil {
		in.broken = true
		return 0, &Fault{Code: CodeTrap, Message: "guest allocation trapped: " + firstLine(err)}
	}
	p := api.DecodeU32(st[0])
	if p == 0 && len(b) > 0 {
		return 0, &Fault{Code: CodeLimitExceeded, Limit: LimitMemory,
			Message: fmt.Sprintf("no guest memory for %d bytes of input", len(b))}
	}
	if !in.mem.Write(p, b) {
		in.broken = true
		return 0, &Fault{Code: CodeTrap, Message: "guest allocated out of range"}
	}
	return p, nil
}

// output copies the guest's output buffer and returns its length n; a buffer longer
// than bound bytes is not copied (out is nil).
func (in *instance) output(ctx context.Context, bound int) (out []byte, n int, err error) {
	in.idleFuel()
	st := in.stack[:1]
	if err := in.outPtr.CallWithStack(ctx, st); err != nil {
		in.broken = true
		return nil, 0, &Fault{Code: CodeTrap, Message: firstLine(err)}
	}
	p := api.DecodeU32(st[0])
	if err := in.outLen.CallWithStack(ctx, st); err != nil {
		in.broken = true
		return nil, 0, &Fault{Code: CodeTrap, Message: firstLine(err)}
	}
	size := api.DecodeU32(st[0])
	b, ok := in.mem.Read(p, size)
	if !ok {
		in.broken = true
		return nil, 0, &Fault{Code: CodeTrap, Message: "guest output out of range"}
	}
	if len(b) > bound {
		return nil, len(b), nil
	}
	return bytes.Clone(b), len(b), nil
}

// idleFuel gives the host's own calls into the guest (allocating the input, reading the
// output: short, bounded code) a grant that never runs out, so that they never ask a call
// for fuel and never count to it.
func (in *instance) idleFuel() {
	if in.fuel != nil {
		in.fuel.Set(fuelIdle)
	}
}

// guestError decodes the guest's error object.
func guestError(c *call, in *instance, out []byte) error {
	var g struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Path    string `json:"path"`
		Stack   string `json:"stack"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(out, &g); err != nil || g.Code == "" {
		in.broken = true
		return &Fault{Code: CodeTrap, Message: "guest reported an error that is not an error object"}
	}
	e := &Fault{Code: g.Code, Message: liberr.Clip(g.Message, maxErrorText), Path: liberr.Clip(g.Path, maxErrorText), Stack: liberr.Clip(g.Stack, maxErrorText)}
	if g.Code == CodeJSError {
		e.Refusal = liberr.Clip(g.Refusal, maxErrorText)
	}
	switch g.Code {
	case "interrupted":
		// The guest stopped because poll or syscall said so; the host knows why.
		if r := c.stopped(); r != running {
			if r == stopFault {
				in.broken = true
			}
			return stopError(c, r)
		}
		in.broken = true
		return &Fault{Code: CodeTrap, Message: "guest interrupted itself without a reason"}
	case "out_of_memory":
		e.Code, e.Limit = CodeLimitExceeded, LimitMemory
		if e.Message == "" {
			e.Message = "out of memory"
		}
	case "stack_overflow":
		e.Code, e.Limit = CodeLimitExceeded, LimitStack
		if e.Message == "" {
			e.Message = "stack overflow"
		}
	case "guest_error":
		// The guest's own setup failed: not the program's fault, and not an instance to
		// trust again.
		in.broken = true
		e.Code = CodeTrap
	case CodeSyntaxError, CodeRunMissing, CodeJSError, CodeNotJSON, CodeUnsettled, CodeArgsInvalid, CodeAmbientClock:
	default:
		// A code outside the ABI: keep the host's promise of stable codes.
		e.Message = g.Code + ": " + e.Message
		e.Code = CodeJSError
	}
	return e
}

// inexactError refuses a number the guest would see changed. Nothing is ever rounded
// silently: the sender learns where the number is and how to send it instead.
func inexactError(where, ptr, num, became string) *Fault {
	at := ptr
	if at == "" {
		at = "the root"
	}
	return &Fault{Code: CodeNumberInexact, Path: ptr, Message: fmt.Sprintf(
		"%s: the number %s at %s cannot be held exactly by a JavaScript number (a double): the program would see %s; send it as a string",
		where, liberr.Clip(num, maxErrorText), at, became)}
}

// stopError is the error for a call the host stopped.
func stopError(c *call, r stopReason) error {
	switch r {
	case stopDeadline:
		return &Fault{Code: CodeLimitExceeded, Limit: LimitWallTime,
			Message: fmt.Sprintf("the call ran past its wall time of %v", c.lim.WallTime)}
	case stopCanceled:
		// poll notices the caller's deadline on the monotonic clock, possibly before the
		// context's own timer has fired: then the context has no cause (yet, or ever for a
		// Context whose deadline is only advisory).
		if cause := context.Cause(c.parent); cause != nil {
			return &Fault{Code: CodeCanceled, Message: "the caller cancelled the call: " + cause.Error()}
		}
		return &Fault{Code: CodeCanceled, Message: "the caller's deadline passed"}
	case stopLogs:
		return &Fault{Code: CodeLimitExceeded, Limit: LimitLogs,
			Message: fmt.Sprintf("console output exceeded %d bytes", c.lim.LogBytes)}
	case stopSyscalls:
		return &Fault{Code: CodeLimitExceeded, Limit: LimitSyscalls,
			Message: fmt.Sprintf("more than %d syscalls", c.lim.Syscalls)}
	case stopSyscallBytes:
		return &Fault{Code: CodeLimitExceeded, Limit: LimitSyscallBytes,
			Message: fmt.Sprintf("syscall arguments or result over %d bytes", c.lim.SyscallBytes)}
	case stopInexact:
		return c.inexact
	case stopFuel:
		return &Fault{Code: CodeLimitExceeded, Limit: LimitFuel,
			Message: fmt.Sprintf("the call used its budget of %d units of guest work", c.lim.Fuel)}
	default:
		return &Fault{Code: CodeTrap, Message: c.fault}
	}
}

// trapError classifies an error from libos_run: the instance is gone either way.
func trapError(c *call, in *instance, err error) error {
	msg := firstLine(err)
	switch {
	case c.stopped() == stopFault:
		return &Fault{Code: CodeTrap, Message: c.fault}
	case errors.Is(err, errFuelStop):
		// A stopped call that did not unwind within its grace: the reason it was
		// stopped for, not the trap that ended it.
		return stopError(c, c.stopped())
	case strings.Contains(msg, "stack overflow"):
		return &Fault{Code: CodeLimitExceeded, Limit: LimitStack, Message: "the guest's stack overflowed"}
	case int64(in.mem.Size())+pageSize*16 > in.capBytes:
		// Within a megabyte of the hard cap: malloc failed where QuickJS could not
		// recover (C code that aborts on NULL).
		return &Fault{Code: CodeLimitExceeded, Limit: LimitMemory, Message: "the guest reached the hard memory cap: " + msg}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if r := c.stopped(); r != running {
			return stopError(c, r)
		}
	}
	return &Fault{Code: CodeTrap, Message: msg}
}

// firstLine drops the wasm stack trace wazero appends to a trap: it names guest-internal
// functions and addresses, which say nothing to the caller.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
