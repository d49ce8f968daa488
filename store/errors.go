package store

import (
	"errors"
	"fmt"
	"github.com/agentlibos/libos/liberr"
	"github.com/cockroachdb/pebble/v2"
)

// Code is a stable, machine-readable error code (the module's one code type). Codes
// never change meaning; new ones may be added.
type Code = liberr.Code

// Error codes returned by this package.
const (
	// CodeNotFound: the record does not exist, or belongs to another process.
	CodeNotFound Code = Code(liberr.CodeNotFound)
	// CodeInUse: another process holds the store directory.
	CodeInUse Code = "in_use"
	// CodeFormatUnsupported: the directory was written by a newer (or unknown) layout.
	CodeFormatUnsupported Code = "format_unsupported"
	// CodeConflict: the write collides with an existing record (duplicate binding
	// name, duplicate candidate ID, a call ID that is already open, …).
	CodeConflict Code = "conflict"
	// CodeIO: the file system failed; nothing in the failed operation was acknowledged.
	CodeIO Code = "io"
	// CodeInvalid: the caller passed a malformed argument (bad ID, bad JSON, …).
	CodeInvalid Code = "invalid"
	// CodeClosed: the store is closed.
	CodeClosed Code = "closed"
	// CodeCorrupt: a stored record cannot be decoded or the event chain does not verify.
	CodeCorrupt Code = "corrupt"
	// CodeLimitExceeded: a budget counter would exceed its limit.
	CodeLimitExceeded Code = Code(liberr.CodeLimitExceeded)
	// CodeCanceled: the context was done before the write was submitted.
	CodeCanceled Code = Code(liberr.CodeCanceled)
	// CodeReadOnly: a write on a store opened read-only (Options.ReadOnly); nothing
	// was written.
	CodeReadOnly Code = "read_only"
)

// Error is the error type of this package: the module's one error type (package
// liberr), with Layer "store". errors.Is matches it against any error of the same
// code (the sentinels below among them) and errors.As reads it. Its message carries
// the cause's text, as the store's errors always have: an operator reading a store
// error sees what the file system or Pebble said.
type Error = liberr.Error

// Layer is the Layer of this package's errors. Other layers read it to keep the
// store's words (file paths, Pebble's messages) from reaching a guest.
const Layer = "store"

const layer = Layer

// Sentinels for errors.Is.
var (
	ErrNotFound          = liberr.New(layer, CodeNotFound, "not found")
	ErrInUse             = liberr.New(layer, CodeInUse, "in use")
	ErrFormatUnsupported = liberr.New(layer, CodeFormatUnsupported, "format unsupported")
	ErrConflict          = liberr.New(layer, CodeConflict, "conflict")
	ErrIO                = liberr.New(layer, CodeIO, "i/o failure")
	ErrInvalid           = liberr.New(layer, CodeInvalid, "invalid argument")
	ErrClosed            = liberr.New(layer, CodeClosed, "closed")
	ErrCorrupt           = liberr.New(layer, CodeCorrupt, "corrupt")
	ErrLimitExceeded     = liberr.New(layer, CodeLimitExceeded, "limit exceeded")
	ErrCanceled          = liberr.New(layer, CodeCanceled, "canceled")
	ErrReadOnly          = liberr.New(layer, CodeReadOnly, "read-only")
)

// CorruptAdvice is what a corrupt store's error tells the operator to do. The store
// cannot repair itself: a file failed its checksum or does not decode, and what it held
// is lost from this copy.
const CorruptAdvice = "the store is corrupt: stop every program using it, keep the directory as it is for " +
	"inspection, and restore it from a backup (or move it aside and start a new store); " +
	"'libos events PID --verify --expect-head SEQ:HASH' on the restored copy shows whether it lost events"

// IsCorrupt reports whether err says the store's files are damaged: a checksum failed,
// a record does not decode, or Pebble found corruption (at open, in a read, or in a
// background compaction). A hash chain that fails verification is a corrupt error
// wrapping a *VerifyError: a finding about a log, not a damaged store; IsCorrupt does
// not report it.
func IsCorrupt(err error) bool {
	var v *VerifyError
	e, ok := liberr.AsLayer(err, layer)
	return ok && e.Code == CodeCorrupt && !errors.As(e, &v)
}

// readErr classifies an error from Pebble: corruption (pebble.ErrCorruption, which
// Pebble marks on checksum failures and undecodable files) is a corrupt error that says
// what to do; anything else is an io error.
func readErr(err error, format string, args ...any) error {
	if pebble.IsCorruptionError(err) {
		return newError(CodeCorrupt, err, fmt.Sprintf(format, args...)+": "+CorruptAdvice)
	}
	return errorf(CodeIO, err, format, args...)
}

// errorf and newError are store errors of code with a message and cause; the message
// ends with the cause's text. They fix this package's layer and nothing else: the
// constructor is liberr's (see RATIONALE.md, "One error constructor").
func errorf(code Code, cause error, format string, args ...any) error {
	return newError(code, cause, fmt.Sprintf(format, args...))
}

func newError(code Code, cause error, msg string) *Error {
	return liberr.WrapQuoting(layer, code, cause, msg)
}

// VerifyError is the position of the first event of a process whose place in the
// hash chain is wrong (edited, removed, inserted or reordered): the cause inside the
// corrupt error that Verify returns. Read it with errors.As.
type VerifyError struct {
	PID    string
	Seq    uint64
	Reason string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("event log of %s fails verification at seq %d: %s", e.PID, e.Seq, e.Reason)
}

// VerifyFailed returns the error of a log that fails verification at seq: code
// corrupt (it matches ErrCorrupt), its position a *VerifyError in the chain.
func VerifyFailed(pid string, seq uint64, reason string) *Error {
	v := &VerifyError{PID: pid, Seq: seq, Reason: reason}
	return liberr.Wrap(layer, CodeCorrupt, v, "%s", v.Error())
}
