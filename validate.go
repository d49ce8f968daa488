package libos

import (
	"context"
	"time"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// Candidate is a JIT tool candidate: the fields of propose_jit_tool.
type Candidate = tools.Candidate

// Report is the result of validating a candidate, as validate_jit_tool records it.
type Report = tools.Report

// Diagnostic is one finding of a validation, with its code and, for the source, its
// line and column.
type Diagnostic = tools.Diagnostic

// ParseCandidate decodes a candidate file (exact JSON: no duplicate or unknown keys).
func ParseCandidate(data []byte) (Candidate, error) { return tools.ParseCandidate(data) }

// ValidatorOptions configures a Validator. The zero value is ready to use.
type ValidatorOptions struct {
	// CacheDir is as in Options: where the compiled sandbox guest is kept between
	// programs; empty compiles in memory.
	CacheDir string
	// OnCacheUnusable is as in Options: when set, a CacheDir that cannot be used is
	// reported to it once and the guest is compiled in memory, rather than failing
	// NewValidator.
	OnCacheUnusable func(error)
	// Clock gives Report.ValidatedAt. Nil means a fixed instant (tools.ValidationTime),
	// so that the same candidate gives the same report byte for byte on every run.
	Clock func() time.Time
	// Parallel bounds how many tests of one validation run at once, each on its own
	// sandbox instance; 0 means tools.DefaultParallelTests or GOMAXPROCS, whichever is
	// smaller, and 1 runs them one after another (same report either way).
	Parallel int
	// PoolSize is how many idle sandbox instances are kept, as in Options; 0 means
	// GOMAXPROCS. A program that validates one candidate and exits passes 1 with
	// Parallel 1: its tests then share one guest memory instead of instantiating a
	// second (about 9 MB less peak RSS for `libos validate` of one file, in no more time).
	PoolSize int
}

// Validator runs what validate_jit_tool runs (the proposal checks, the static checks of
// the TypeScript, the schema lint, every test in the sandbox on its syscall tape)
// without a store or a process: for CI, and for checking a candidate before proposing
// it. It compiles the sandbox once and is safe for concurrent use, so one Validator
// serves a whole directory of candidates.
type Validator struct {
	sandbox *wasm.Engine
	v       *tools.Validator
}

// NewValidator starts the sandbox for validations.
func NewValidator(ctx context.Context, opts ValidatorOptions) (*Validator, error) {
	sb, err := newSandbox(ctx, wasm.Config{CacheDir: opts.CacheDir, OnCacheUnusable: opts.OnCacheUnusable, PoolSize: opts.PoolSize})
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = func() time.Time { return tools.ValidationTime }
	}
	return &Validator{sandbox: sb, v: tools.NewValidator(sb, tools.ValidatorConfig{Clock: clock, Parallel: opts.Parallel})}, nil
}

// Precheck does ahead of time the part of validating c that needs no sandbox (the
// proposal checks, compiling its schemas and its TypeScript) and keeps the result in
// this process for the next validation of c, which finds it there and reports the same.
// A program that validates right after NewValidator can call it meanwhile on another
// goroutine, as 'libos validate' does, so that the compile overlaps the sandbox's start.
func Precheck(c Candidate) { tools.Precheck(c, tools.Limits{}) }

// Validate parses a candidate file and validates it. A file that is not a candidate is
// an error (typed, with its code); a candidate that fails its checks or tests is a
// Report with OK false.
func (v *Validator) Validate(ctx context.Context, candidate []byte) (Report, error) {
	c, err := tools.ParseCandidate(candidate)
	if err != nil {
		return Report{}, err
	}
	return v.v.Validate(ctx, c), nil
}

// ValidateCandidate validates a parsed candidate.
func (v *Validator) ValidateCandidate(ctx context.Context, c Candidate) Report {
	return v.v.Validate(ctx, c)
}

// Prestarted reports whether the validator's sandbox is the one wasm.Prestart started
// (package wasm), which the libos command does while it initialises.
func (v *Validator) Prestarted() bool { return v.sandbox.Prestarted() }

// Close stops the sandbox.
func (v *Validator) Close() error {
	return v.sandbox.Close(context.Background())
}

// WarmCache compiles the sandbox guest into the compilation cache in dir, and keeps there
// the snapshot of the state every call starts from, so that the next program using dir
// starts without compiling or preparing (a CI cache step keeps dir between runs). A cache
// that already holds them for this guest is left as it is.
func WarmCache(ctx context.Context, dir string) error {
	if dir == "" {
		return liberr.New("libos", CodeCacheUnusable, "no compilation cache directory given")
	}
	sb, err := newSandbox(ctx, wasm.Config{CacheDir: dir, PoolSize: -1})
	if err != nil {
		return err
	}
	if err := sb.Prepare(ctx); err != nil {
		sb.Close(ctx)
		return err
	}
	return sb.Close(ctx)
}

// LogLine is one console line a test printed.
type LogLine = tools.LogLine
