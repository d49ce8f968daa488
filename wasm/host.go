package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/tetratelabs/wazero/api"

	"github.com/agentlibos/libos/wasm/internal/fuel"
)

// The host module "libos" is instantiated once per Engine and shared by all instances.
// Its functions find the state of the call in progress in the context that Run passes to
// libos_run: wazero hands that context to every host function the guest calls.

type callKey struct{}

// stopReason says why a call must end early. It is set from the host functions, from the
// wall-time timer and from context cancellation, and read by poll.
type stopReason int32

const (
	running stopReason = iota
	stopDeadline
	stopCanceled
	stopLogs
	stopSyscalls
	stopSyscallBytes
	stopInexact // a syscall result held a number the guest cannot hold exactly (call.inexact)
	stopFault   // the host gave up: a host-side panic or a guest that broke the ABI
	stopFuel    // the call spent its fuel budget (Limits.Fuel)
)

// call is the state of one Run. Everything but stop is touched only by the goroutine
// running the guest (host functions run on it).
type call struct {
	stop   atomic.Int32
	ctx    context.Context // bounded by the wall time; handed to the Syscaller
	parent context.Context
	sys    Syscaller
	// inexact is the refusal of a syscall result (stopInexact).
	inexact *Fault
	lim     Limits

	// deadline is when the call must stop, on the monotonic clock (since monoBase): the
	// wall time, or the caller's own deadline when that comes first (parentDeadline).
	deadline       time.Duration
	parentDeadline bool
	// noPoll makes poll answer "continue" without looking: benchmarks use it to measure
	// what the time limit costs.
	noPoll bool
	polls  int64

	// The fuel (see hostFuel): fuelBudget is Limits.Fuel (0: none), fuelUsed what the
	// guest spent up to the last grant, fuelGrant what that grant gave it, fuelPolls how
	// often it came back for more. graced is set once a stopped call got its last grant.
	fuelBudget int64
	fuelUsed   int64
	fuelGrant  int64
	fuelPolls  int64
	graced     bool

	syscalls      int
	pending       []byte
	logs          []Log
	logBytes      int
	logsTruncated bool
	fault         string
}

func (c *call) halt(r stopReason) { c.stop.CompareAndSwap(int32(running), int32(r)) }

func (c *call) stopped() stopReason { return stopReason(c.stop.Load()) }

func (c *call) faulted(format string, args ...any) {
	if c.fault == "" {
		c.fault = fmt.Sprintf(format, args...)
	}
	c.halt(stopFault)
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
	f64 = api.ValueTypeF64
)

func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder("libos")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(hostNowMs), nil, []api.ValueType{f64}).
		WithName("now_ms").Export("now_ms")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(hostPoll), nil, []api.ValueType{i32}).
		WithName("poll").Export("poll")
	b.NewFunctionBuilder().WithGoFunction(api.GoFunc(hostFuel), []api.ValueType{i64}, []api.ValueType{i64}).
		WithName(fuel.ImportName).Export(fuel.ImportName)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostSyscall), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithName("syscall").Export("syscall")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostSyscallTake), []api.ValueType{i32}, nil).
		WithName("syscall_take").Export("syscall_take")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithName("log").Export("log")
	_, err := b.Instantiate(ctx)
	return err
}

// hostNowMs: () → f64, the host's clock in milliseconds since the Unix epoch. No script
// reads it: the prelude makes Date.now(), Date() and new Date() without an argument
// throw ambient_clock, so the time reaches a program only through a syscall its caller
// checks. Only the C library reads it (QuickJS's Date internals, profiling builds).
func hostNowMs(_ context.Context, stack []uint64) {
	ms := min(max(time.Now().UnixMilli(), -maxDateMs), maxDateMs)
	stack[0] = api.EncodeF64(float64(ms))
}

// maxDateMs is the edge of the time range a JavaScript Date can hold (±10^8 days); a
// caller's clock outside it is held at the edge rather than overflowing in the guest.
const maxDateMs = 8.64e15

// monoBase anchors call deadlines on the monotonic clock.
var monoBase = time.Now()

// hostPoll: () → i32, 1 when the call must stop. The guest calls it from QuickJS's
// interrupt handler, regex backtracking and long built-in loops (about once a
// millisecond of busy JavaScript), so it allocates nothing: one atomic load for the flag
// that cancellation, the timer and the limits set, and one monotonic clock read so that
// the deadline holds even when the timer's goroutine is slow to be scheduled.
func hostPoll(ctx context.Context, stack []uint64) {
	stack[0] = 0
	c := callFrom(ctx)
	if c == nil || c.noPoll {
		return
	}
	c.polls++
	if c.stop.Load() == int32(running) {
		if time.Since(monoBase) < c.deadline {
			return
		}
		c.halt(c.ctxReason())
	}
	stack[0] = 1
}

// Fuel grants. The guest's code is instrumented (internal/fuel): every function entry and
// every loop iteration subtracts the length of the straight-line run it starts from a
// counter, and calls the fuel import when the counter goes below zero. fuelSlice is
// between a fifth of a millisecond (the bytecode interpreter) and about a millisecond
// (C loops such as a substring search) on a current x86-64 core, so a guest reaches the
// host, and its goroutine a Go safe point, that often whatever it runs; fuelGrace, a few
// milliseconds, is what a stopped call gets to reach one of QuickJS's own polls (every
// 10,000 bytecode branches and calls, every 4096 regex backtracking steps) and unwind
// cleanly.
const (
	fuelSlice = 1 << 16
	fuelGrace = 1 << 20
	// fuelIdle is the grant outside a call (instantiation, prepare, the host's own
	// calls to libos_alloc and the output): those run the guest's own code, bounded.
	fuelIdle = 1 << 40
)

// errFuelStop is the panic with which hostFuel ends a stopped call that did not unwind
// within its grace: wazero turns it into the error libos_run returns, the instance is
// discarded, and trapError reports the reason the call was stopped for.
var errFuelStop = errors.New("wasm: the call was stopped at a fuel check")

// hostFuel: (remaining i64) → (grant i64). The guest calls it when its fuel counter went
// below zero, remaining being the counter (the overshoot of the last check). It counts
// what the guest spent, stops the call when it spent its budget (Limits.Fuel), when the
// wall time passed or when the caller cancelled, and answers the next grant. A call
// already stopped gets fuelGrace once, to be interrupted by QuickJS's own poll, which
// unwinds the JavaScript stack and leaves an instance that can be restored; a call that
// comes back after its grace (C code that never polls) is ended by a trap.
func hostFuel(ctx context.Context, stack []uint64) {
	remaining := int64(stack[0])
	c := callFrom(ctx)
	if c == nil || c.noPoll {
		stack[0] = fuelIdle
		return
	}
	c.fuelUsed += c.fuelGrant - remaining
	c.fuelGrant = 0
	c.fuelPolls++
	if c.stop.Load() == int32(running) {
		switch {
		case c.fuelBudget > 0 && c.fuelUsed >= c.fuelBudget:
			c.halt(stopFuel)
		case time.Since(monoBase) >= c.deadline:
			c.halt(c.ctxReason())
		}
	}
	if c.stopped() != running {
		if c.graced {
			panic(errFuelStop)
		}
		c.graced = true
		c.fuelGrant = c.grace()
	} else {
		c.fuelGrant = c.nextGrant()
	}
	stack[0] = uint64(c.fuelGrant)
}

// grace is the fuel a stopped call gets to unwind: fuelGrace, but no more than half
// a fuel budget (and no less than a slice), so that a call stopped by its budget does
// at most 1.5× its budget of work in all, whatever the budget.
func (c *call) grace() int64 {
	if c.fuelBudget > 0 {
		return min(fuelGrace, max(c.fuelBudget/2, fuelSlice))
	}
	return fuelGrace
}

// nextGrant is a slice of fuel, or what is left of the budget when that is less.
func (c *call) nextGrant() int64 {
	if c.fuelBudget > 0 {
		return max(min(fuelSlice, c.fuelBudget-c.fuelUsed), 0)
	}
	return fuelSlice
}

// interruptNow is the syscall import's answer that makes the guest unwind at once.
const interruptNow = ^uint64(0) & 0xFFFFFFFF // -1 as i32

// maxSyscallName bounds a route name; the router knows no longer ones.
const maxSyscallName = 256

// hostSyscall: (name_ptr, name_len, args_ptr, args_len) → n | -1.
func hostSyscall(ctx context.Context, mod api.Module, stack []uint64) {
	namePtr, nameLen := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	argsPtr, argsLen := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	stack[0] = interruptNow
	c := callFrom(ctx)
	if c == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.faulted("syscall panicked: %v", r)
			stack[0] = interruptNow
		}
	}()
	if c.stopped() != running {
		return
	}
	c.pending = nil
	c.syscalls++
	if c.syscalls > c.lim.Syscalls {
		c.halt(stopSyscalls)
		return
	}
	if int64(argsLen) > int64(c.lim.SyscallBytes) {
		c.halt(stopSyscallBytes)
		return
	}
	mem := mod.Memory()
	nameBytes, ok1 := mem.Read(namePtr, nameLen)
	argBytes, ok2 := mem.Read(argsPtr, argsLen)
	if !ok1 || !ok2 {
		c.faulted("syscall: guest pointer out of range")
		return
	}
	var resp []byte
	switch {
	case nameLen > maxSyscallName || !utf8.Valid(nameBytes) || c.sys == nil:
		// One fixed answer that reveals nothing about which routes exist.
		resp = errorResponse(CodeUnknownSyscall, "unknown syscall")
	default:
		// The arguments are parsed here, once, exactly: a Syscaller that takes them
		// decoded (ExactSyscaller) reads this decoding and parses nothing. Text that is
		// JSON but not exact JSON (a repeated key, a lone surrogate, too deep) goes on as
		// text, for the Syscaller's own exact check to refuse with its own error; only
		// on that failure path does json.Valid tell it from text that is not JSON.
		args := json.RawMessage(append([]byte(nil), argBytes...))
		value, derr := jsonexact.Decode(args, 0)
		if derr != nil && !json.Valid(args) {
			resp = errorResponse(CodeSyscallArgsInvalid, "syscall arguments are not JSON")
			break
		}
		var interrupt bool
		resp, interrupt = c.invoke(string(nameBytes), args, value, derr == nil)
		if interrupt {
			return
		}
	}
	c.pending = resp
	stack[0] = uint64(uint32(len(resp)))
}

// invoke runs the Syscaller and builds the response the guest will take. interrupt is
// true when the call must stop instead (deadline, cancellation, a limit).
func (c *call) invoke(name string, args json.RawMessage, value jsonexact.Value, exact bool) (resp []byte, interrupt bool) {
	result, err := c.safeSyscall(name, args, value, exact)
	// The deadline is checked on the monotonic clock, as poll does: a Syscaller that
	// gave up because time ran out can return before the context's timer has fired
	// (and a caller's deadline may be only advisory), and its failure must not reach
	// the guest as an ordinary rejection it could catch.
	if c.stopped() == running && time.Since(monoBase) >= c.deadline {
		c.halt(c.ctxReason())
	}
	if c.stopped() != running {
		return nil, true
	}
	if err != nil {
		var se *liberr.Error
		switch {
		case errors.As(err, &se):
			return errorResponse(string(se.Code), se.Error()), false
		case c.ctx.Err() != nil:
			// The Syscaller gave up because the call's time ran out or the caller
			// cancelled; the flag may not be set yet when the timer races us.
			c.halt(c.ctxReason())
			return nil, true
		default:
			return errorResponse(CodeSyscallFailed, "syscall failed"), false
		}
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if len(result) > c.lim.SyscallBytes {
		c.halt(stopSyscallBytes)
		return nil, true
	}
	if !json.Valid(result) {
		return errorResponse(CodeSyscallFailed, "syscall failed"), false
	}
	if ptr, num, became, bad := jsonexact.Inexact(result); bad {
		// The call stops here rather than letting the program catch a rejection and
		// carry on without the value: the result was the provider's, not the program's.
		c.inexact = inexactError("result of syscall "+name, ptr, num, became)
		c.halt(stopInexact)
		return nil, true
	}
	resp = make([]byte, 0, len(result)+len(`{"ok":true,"result":}`))
	resp = append(resp, `{"ok":true,"result":`...)
	resp = append(resp, result...)
	resp = append(resp, '}')
	return resp, false
}

// safeSyscall turns a panicking Syscaller into an ordinary failure: the guest sees the
// generic code, the host keeps running.
func (c *call) safeSyscall(name string, args json.RawMessage, value jsonexact.Value, exact bool) (result json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("wasm: syscaller panicked: %v", r)
		}
	}()
	if es, ok := c.sys.(ExactSyscaller); ok && exact {
		return es.SyscallExact(c.ctx, name, args, value)
	}
	return c.sys.Syscall(c.ctx, name, args)
}

// ctxReason tells the caller's cancellation (or its own deadline passing) from the
// call's wall time running out.
func (c *call) ctxReason() stopReason {
	if c.parent.Err() != nil || (c.parentDeadline && time.Since(monoBase) >= c.deadline) {
		return stopCanceled
	}
	return stopDeadline
}

func errorResponse(code, message string) []byte {
	type errBody struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		OK    bool    `json:"ok"`
		Error errBody `json:"error"`
	}{false, errBody{code, strings.ToValidUTF8(message, "\uFFFD")}})
	if err != nil { // unreachable: two strings always marshal
		return []byte(`{"ok":false,"error":{"code":"syscall_failed","message":"syscall failed"}}`)
	}
	return b
}

// hostSyscallTake: (ptr) → (), copies the pending response into the guest.
func hostSyscallTake(ctx context.Context, mod api.Module, stack []uint64) {
	ptr := api.DecodeU32(stack[0])
	c := callFrom(ctx)
	if c == nil {
		return
	}
	if c.pending == nil {
		c.faulted("syscall_take without a pending response")
		return
	}
	if !mod.Memory().Write(ptr, c.pending) {
		c.faulted("syscall_take: guest pointer out of range")
	}
	c.pending = nil
}

var logLevels = [...]string{"debug", "info", "warn", "error"}

// hostLog: (level, ptr, len) → (), one console line. Each line costs its bytes plus one
// (the line break it would take in a transcript), so that empty lines are bounded too.
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	c := callFrom(ctx)
	if c == nil || c.stopped() != running {
		return
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		c.faulted("log: guest pointer out of range")
		return
	}
	lvl := "info"
	if int(level) < len(logLevels) {
		lvl = logLevels[level]
	}
	room := c.lim.LogBytes - c.logBytes - 1
	if len(b) > room {
		if room > 0 {
			c.logs = append(c.logs, Log{Level: lvl, Message: liberr.Cut(string(b), room)})
		}
		c.logBytes = c.lim.LogBytes
		c.logsTruncated = true
		c.halt(stopLogs)
		return
	}
	c.logBytes += len(b) + 1
	c.logs = append(c.logs, Log{Level: lvl, Message: strings.ToValidUTF8(string(b), "\uFFFD")})
}
