package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	// Starts the sandbox of 'libos validate' while the other packages initialise
	// (package prestart).
	_ "github.com/agentlibos/libos/cmd/libos/internal/prestart"
	"github.com/agentlibos/libos/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes. validate uses all three; other commands use 0 and 1 for their outcome
// and 2 for usage, I/O and storage errors.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and its answer is "no": a rejected candidate, a failed check
	exitUsage   = 2 // bad flags or arguments, unreadable files, an unusable store
	exitUnknown = exitUsage
)

// exitError carries the exit code a command wants; the message has already been
// printed when quiet is set.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// corruptErr is the outcome of meeting a corrupt store: exit 2, with the store's own
// advice on what to do.
func corruptErr(err error) error {
	if !strings.Contains(err.Error(), store.CorruptAdvice) {
		err = fmt.Errorf("%w (%s)", err, store.CorruptAdvice)
	}
	return &exitError{code: exitUsage, err: err}
}

// failed is the "ran, and the answer is no" outcome; its report is already printed.
func failed() error { return &exitError{code: exitFailed, quiet: true} }

// usageErr is a usage or I/O error: exit 2 with the message and a hint.
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// run is main without the process: tests call it in-process for speed where the
// binary itself is not what is under test.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(&env{stdin: stdin, stdout: stdout, stderr: stderr})
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// A damaged store is an I/O error whatever command met it, and its message says
	// what to do.
	if store.IsCorrupt(err) {
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			err = corruptErr(err)
		}
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.quiet && ee.err != nil {
			fmt.Fprintln(stderr, "libos:", ee.err)
		}
		return ee.code
	}
	// Cobra's own errors (unknown command or flag, wrong argument count) and every
	// error a command did not classify are usage or I/O errors.
	fmt.Fprintln(stderr, "libos:", err)
	fmt.Fprintln(stderr, "Run 'libos --help' for usage.")
	return exitUnknown
}
