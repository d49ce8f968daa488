package store

import (
	"errors"
	"fmt"
	"github.com/agentlibos/libos/liberr"
	"github.com/cockroachdb/pebble/v2"
)

// Code is a stable, machine-readable error code. Codes never change meaning; new ones
// may be added.
type Code string

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
)

// Error is the error type of this package. Match it with errors.Is against the
// sentinels below (which compare by Code) or errors.As to read Code.
type Error struct {
	Code Code
	Msg  string // human readable, without the "store: " prefix
	Err  error  // underlying cause, if any
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = string(e.Code)
	}
	if e.Err != nil {
		return "store: " + msg + ": " + e.Err.Error()
	}
	return "store: " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a *Error with the same Code, so that
// errors.Is(err, store.ErrNotFound) holds for every not-found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrNotFound          = &Error{Code: CodeNotFound, Msg: "not found"}
	ErrInUse             = &Error{Code: CodeInUse, Msg: "in use"}
	ErrFormatUnsupported = &Error{Code: CodeFormatUnsupported, Msg: "format unsupported"}
	ErrConflict          = &Error{Code: CodeConflict, Msg: "conflict"}
	ErrIO                = &Error{Code: CodeIO, Msg: "i/o failure"}
	ErrInvalid           = &Error{Code: CodeInvalid, Msg: "invalid argument"}
	ErrClosed            = &Error{Code: CodeClosed, Msg: "closed"}
	ErrCorrupt           = &Error{Code: CodeCorrupt, Msg: "corrupt"}
	ErrLimitExceeded     = &Error{Code: CodeLimitExceeded, Msg: "limit exceeded"}
	ErrCanceled          = &Error{Code: CodeCanceled, Msg: "canceled"}
)

// CodeOf returns the Code of err, or "" when err is not a store error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// CorruptAdvice is what a corrupt store's error tells the operator to do. The store
// cannot repair itself: a file failed its checksum or does not decode, and what it held
// is lost from this copy.
const CorruptAdvice = "the store is corrupt: stop every program using it, keep the directory as it is for " +
	"inspection, and restore it from a backup (or move it aside and start a new store); " +
	"'libos events PID --verify --expect-head SEQ:HASH' on the restored copy shows whether it lost events"

// IsCorrupt reports whether err says the store's files are damaged: a checksum failed,
// a record does not decode, or Pebble found corruption (at open, in a read, or in a
// background compaction). A hash chain that fails verification is a *VerifyError,
// which matches ErrCorrupt but is a finding about a log, not a damaged store; IsCorrupt
// does not report it.
func IsCorrupt(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeCorrupt
}

// readErr classifies an error from Pebble: corruption (pebble.ErrCorruption, which
// Pebble marks on checksum failures and undecodable files) is a corrupt error that says
// what to do; anything else is an io error.
func readErr(err error, format string, args ...any) error {
	if pebble.IsCorruptionError(err) {
		return &Error{Code: CodeCorrupt, Msg: fmt.Sprintf(format, args...) + ": " + CorruptAdvice, Err: err}
	}
	return errorf(CodeIO, err, format, args...)
}

func errorf(code Code, cause error, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// VerifyError reports the first event of a process whose place in the hash chain
// is wrong: edited, removed, inserted or reordered. It matches ErrCorrupt.
type VerifyError struct {
	PID    string
	Seq    uint64
	Reason string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("store: event log of %s fails verification at seq %d: %s", e.PID, e.Seq, e.Reason)
}

// Is makes a VerifyError match ErrCorrupt.
func (e *VerifyError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == CodeCorrupt
}
