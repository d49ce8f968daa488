package wasm

import (
	"errors"
	"github.com/agentlibos/libos/liberr"
	"strings"
)

// Stable error codes of *Error. Callers and the audit log match on these, never on messages.
const (
	// CodeSyntaxError: the program does not parse.
	CodeSyntaxError = string(liberr.CodeSyntaxError)
	// CodeRunMissing: the program defines no function run.
	CodeRunMissing = "run_missing"
	// CodeJSError: run threw, or the Promise it returned rejected.
	CodeJSError = "js_error"
	// CodeNotJSON: the value run returned is not plain JSON; Path names the first offender.
	CodeNotJSON = "not_json"
	// CodeUnsettled: run returned a Promise that never settled.
	CodeUnsettled = "unsettled"
	// CodeArgsInvalid: the arguments are not exact JSON (invalid UTF-8, a lone surrogate
	// escape, a repeated key, nesting too deep: the message says what and at which
	// byte), or not an object. They are refused before the program runs.
	CodeArgsInvalid = "args_invalid"
	// CodeLimitExceeded: a per-call limit was hit; Limit names which one.
	CodeLimitExceeded = string(liberr.CodeLimitExceeded)
	// CodeCanceled: the caller's context was cancelled (or its own deadline passed).
	CodeCanceled = string(liberr.CodeCanceled)
	// CodeAmbientClock: the program called Date.now(), Date() or new Date() without an
	// argument. The sandbox has no ambient clock: the time comes from the clock.now
	// syscall, which the caller's Syscaller checks and records.
	CodeAmbientClock = "ambient_clock"
	// CodeNumberInexact: a number in the arguments, or in a syscall result, that a
	// JavaScript number (a double) cannot hold exactly; Path is its JSON Pointer. It is
	// refused before the program sees it, never rounded.
	CodeNumberInexact = "number_inexact"
	// CodeTrap: the instance trapped; it was discarded and the engine stays usable.
	CodeTrap = "trap"
	// CodeCacheUnusable: Config.CacheDir cannot be created or written (CheckCacheDir);
	// the error of the compile, or what Config.OnCacheUnusable is given.
	CodeCacheUnusable = string(liberr.CodeCacheUnusable)
)

// Values of Error.Limit when Code is CodeLimitExceeded.
const (
	LimitWallTime     = "wall_time"
	LimitMemory       = "memory"
	LimitStack        = "stack"
	LimitOutput       = "output"
	LimitLogs         = "logs"
	LimitSyscalls     = "syscalls"
	LimitSyscallBytes = "syscall_bytes"
	// LimitFuel: the call did more guest work than Limits.Fuel allows.
	LimitFuel = "fuel"
)

// Codes that reach the guest in a rejected syscall Promise when the host, not the Syscaller,
// refuses the call.
const (
	// CodeUnknownSyscall is the one fixed answer to every syscall when Run has no Syscaller.
	CodeUnknownSyscall = string(liberr.CodeUnknownSyscall)
	// CodeSyscallFailed replaces any Syscaller error that is not a *liberr.Error, so that
	// host internals never reach the guest.
	CodeSyscallFailed = "syscall_failed"
	// CodeSyscallArgsInvalid: the guest passed arguments that are not JSON.
	CodeSyscallArgsInvalid = "syscall_args_invalid"
)

// ErrClosed is returned (wrapped) by Run after Close.
var ErrClosed = errors.New("wasm: engine closed")

// Error is what Run returns for a failure of the guest program: the module's one error
// type (package liberr), with Layer "wasm", a stable Code, and a Message that names the
// code, the limit and the path ("limit_exceeded (memory): …"). Its cause is the
// *Fault, the sandbox's own account of the failure as data; read it with errors.As.
type Error = liberr.Error

// Layer is the Layer of this package's errors.
const Layer = "wasm"

// Fault is the sandbox's account of a failure of the guest program, the cause inside
// its *Error: the Code, a human-readable Message, the JSON Path of the offending value
// for CodeNotJSON, the Limit that was hit for CodeLimitExceeded, and the JavaScript
// Stack when the guest had one.
type Fault struct {
	Code    string
	Message string
	Path    string
	Limit   string
	Stack   string
	// Refusal is set on a CodeJSError whose thrown value is a refused syscall's error
	// that the program let escape: the code the Syscaller refused it with. The guest
	// knows the refusal by identity (guest/ABI.md), so a program that throws an error of
	// its own with the same text is not mistaken for it.
	Refusal string
}

// Error returns the code, the limit, the path and the message, as the *Error's message.
func (f *Fault) Error() string {
	var b strings.Builder
	b.WriteString(f.Code)
	if f.Limit != "" {
		b.WriteString(" (")
		b.WriteString(f.Limit)
		b.WriteString(")")
	}
	if f.Path != "" {
		b.WriteString(" at ")
		b.WriteString(f.Path)
	}
	if f.Message != "" {
		b.WriteString(": ")
		b.WriteString(f.Message)
	}
	return b.String()
}

// Is reports whether target is a *Fault with the same Code and, when target names one,
// the same Limit, so that errors.Is(err, &wasm.Fault{Code: wasm.CodeLimitExceeded,
// Limit: wasm.LimitMemory}) tells one limit from another (errors.Is against an *Error
// compares codes only).
func (f *Fault) Is(target error) bool {
	t, ok := target.(*Fault)
	if !ok {
		return false
	}
	return t.Code == f.Code && (t.Limit == "" || t.Limit == f.Limit)
}

// asError returns err as Run returns it: a *Fault becomes the *Error that wraps it;
// any other error is unchanged.
func asError(err error) error {
	f, ok := err.(*Fault)
	if !ok {
		return err
	}
	return &Error{Layer: Layer, Code: liberr.Code(f.Code), Message: f.Error(), Err: f}
}

// maxErrorText bounds the message and stack of a guest error: a program can throw an
// Error whose message is megabytes long, and the caller (and the audit log) should not
// carry it.
const maxErrorText = 8 << 10
