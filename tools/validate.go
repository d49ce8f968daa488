package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/internal/schemaerr"
	"github.com/agentlibos/libos/jsbundle"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/wasm"
)

// Report is the evidence of one validation: what validate_jit_tool returns and
// persists. Every list is bounded (see the Max* constants); a list that was cut ends
// with a diagnostic of code diagnostics_truncated.
type Report struct {
	OK       bool         `json:"ok"`
	Errors   []Diagnostic `json:"errors"`
	Warnings []Diagnostic `json:"warnings"`
	Logs     []LogLine    `json:"logs"`
	Tests    []TestResult `json:"tests"`
	// ValidatedAt is read from the Validator's clock when the validation ends.
	ValidatedAt time.Time `json:"validated_at"`
}

// Diagnostic is one finding. Line and Column (1-based, UTF-16 columns) point into the
// TypeScript source; Test is the index of the test it concerns, Entry the index of the
// tape entry, Path a JSON path into a value ($.a[0]) or a JSON pointer into a schema.
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Test    *int   `json:"test,omitempty"`
	Entry   *int   `json:"entry,omitempty"`
	Path    string `json:"path,omitempty"`
}

// LogLine is one console line a test's program wrote.
type LogLine struct {
	Test    int    `json:"test"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

// TestResult is the verdict on one test. Error is set when it failed; Observed is what
// the program returned, when it returned something and the test failed.
type TestResult struct {
	Index    int             `json:"index"`
	OK       bool            `json:"ok"`
	Error    *Diagnostic     `json:"error,omitempty"`
	Observed json.RawMessage `json:"observed,omitempty"`
}

// Report bounds.
const (
	MaxReportErrors   = 32
	MaxReportWarnings = 64
	MaxReportLogs     = 64
	MaxMessageBytes   = 1 << 10
	MaxObservedBytes  = 2 << 10
)

// Codes of validation findings that are not jsbundle's, the sandbox's or the tape's.
const (
	// CodeExpectedMismatch: the value returned is not exactly (as JSON) expected.
	CodeExpectedMismatch = "expected_mismatch"
	// WarnNoTests: with no tests, validation proves only that the source compiles.
	WarnNoTests = "no_tests"
	// WarnArgsSchema: a test's args would be rejected by the input schema at call time.
	WarnArgsSchema = "test_args_schema"
	// WarnExpectedSchema: a test's expected value would fail the output schema.
	WarnExpectedSchema = "test_expected_schema"
	// CodeTruncated ends a list that reached its bound.
	CodeTruncated = "diagnostics_truncated"
)

// ValidationTime is a fixed instant for a report that must be the same on every run
// (`libos validate` stamps validated_at with it). No program reads it: the sandbox has
// no ambient clock (Date.now() and new Date() throw ambient_clock), so validation is
// deterministic byte for byte with ValidationSeed seeding Math.random.
var ValidationTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ValidationSeed seeds Math.random in every test.
const ValidationSeed uint64 = 0x5eed

// ValidatorConfig configures a Validator. The zero value is ready to use.
type ValidatorConfig struct {
	// Limits bound the proposal; zero fields default.
	Limits Limits
	// Run bounds each test's run in the sandbox. Zero fields are the sandbox's
	// defaults, except Fuel, which defaults to DefaultTestFuel (a negative Fuel means
	// none), and WallTime, which defaults to DefaultTestWallTime. The fuel decides; the
	// wall time is a backstop far above what the fuel takes on a loaded machine, so
	// that a verdict is the same on every machine.
	Run wasm.Limits
	// WallTime bounds the whole validation's test runs, as a backstop too; tests that
	// would start after it ran out fail with limit_exceeded. Zero means
	// DefaultValidationWallTime.
	WallTime time.Duration
	// Clock gives Report.ValidatedAt; nil means time.Now. Tools that print reports
	// (the CLI) pass a fixed clock to keep their output deterministic.
	Clock func() time.Time
	// Parallel bounds how many of a validation's tests run at once, each on its own
	// sandbox instance in its own fresh context. Zero means the smaller of GOMAXPROCS and
	// DefaultParallelTests; 1 runs them one after another. The report is the same either
	// way: tests, errors and logs are listed in test order.
	Parallel int
}

// DefaultParallelTests bounds the tests of one validation running at once when
// ValidatorConfig.Parallel is zero.
const DefaultParallelTests = 4

// DefaultTestFuel is each test's budget of guest work (wasm.Limits.Fuel) when
// ValidatorConfig.Run sets none: about a second of busy JavaScript on a current x86-64
// core, and the same count on every machine, so a test that passes on a laptop passes in
// CI under any load.
const DefaultTestFuel = 1 << 28

// Default wall times, backstops behind the fuel: each test's, when ValidatorConfig.Run
// sets none, and the whole validation's.
const (
	DefaultTestWallTime       = 30 * time.Second
	DefaultValidationWallTime = 2 * time.Minute
)

// Validator runs validations on a sandbox. It is safe for concurrent use and holds no
// state between validations.
type Validator struct {
	sandbox  *wasm.Engine
	limits   Limits
	run      wasm.Limits
	total    time.Duration
	clock    func() time.Time
	parallel int
}

// NewValidator returns a validator running tests on sandbox.
func NewValidator(sandbox *wasm.Engine, cfg ValidatorConfig) *Validator {
	v := &Validator{sandbox: sandbox, limits: cfg.Limits.withDefaults(), run: cfg.Run, total: cfg.WallTime, clock: cfg.Clock}
	if v.total <= 0 {
		v.total = DefaultValidationWallTime
	}
	if v.run.WallTime <= 0 {
		v.run.WallTime = DefaultTestWallTime
	}
	switch {
	case v.run.Fuel == 0:
		v.run.Fuel = DefaultTestFuel
	case v.run.Fuel < 0:
		v.run.Fuel = 0
	}
	if v.clock == nil {
		v.clock = time.Now
	}
	v.parallel = cfg.Parallel
	if v.parallel <= 0 {
		v.parallel = min(runtime.GOMAXPROCS(0), DefaultParallelTests)
	}
	return v
}

// Precheck does ahead of time the part of validating c that needs no sandbox: the
// proposal checks with lim (zero fields default), which compile the schemas, and
// jsbundle's compile of the source. Both are pure and kept in this process's memos
// (memo.go), where a Validate of c with the same limits finds them, so it changes no
// report; it reports nothing itself. A program that starts the sandbox and then
// validates runs it meanwhile on another goroutine ('libos validate' does), so the
// TypeScript compile, whose first run in a process also parses esbuild's runtime,
// overlaps the sandbox's start instead of following it.
func Precheck(c Candidate, lim Limits) {
	lim = lim.withDefaults()
	if _, err := checkProposal(c, lim); err != nil {
		return // Validate stops at the same error, before compiling
	}
	compileSource(c.SourceCode, sourceOptions(lim))
}

// sourceOptions are jsbundle's options for a source under lim, the same for Precheck
// and Validate, so that one finds what the other compiled.
func sourceOptions(lim Limits) jsbundle.Options {
	return jsbundle.Options{MaxSourceBytes: lim.MaxSourceBytes}
}

// Validate checks c and runs its tests. It needs no store and persists nothing:
// validate_jit_tool persists the Report, `libos validate` prints it.
//
// In order: the proposal checks (CheckProposal); jsbundle's static checks and
// transpilation; the schema portability lint (warnings); a warning for each test
// whose args the input schema would reject at call time and each expected value the
// output schema would reject (tests do not exercise schemas); a warning when there are
// no tests; then every test in the sandbox, each in a fresh JavaScript context, with
// Date at ValidationTime, Math.random seeded with ValidationSeed and every syscall
// answered by the test's tape. A test passes when the tape was followed exactly (a
// mismatch fails it even if the program caught the rejection; leftover entries fail
// it) and the returned value equals expected as JSON. OK is true when there are no
// errors. Tests run up to ValidatorConfig.Parallel at once; the report lists them in
// test order and is the same as if they had run one after another.
func (v *Validator) Validate(ctx context.Context, c Candidate) (r Report) {
	r = Report{Errors: []Diagnostic{}, Warnings: []Diagnostic{}, Logs: []LogLine{}, Tests: []TestResult{}}
	defer func() {
		r.OK = len(r.Errors) == 0
		r.ValidatedAt = v.clock().UTC()
	}()
	p, perr := checkProposal(c, v.limits)
	if perr != nil {
		r.addError(Diagnostic{Code: string(perr.Code), Message: perr.Message})
		return r
	}
	prog, diags := compileSource(c.SourceCode, sourceOptions(v.limits))
	for _, d := range diags {
		dd := Diagnostic{Code: d.Code, Message: liberr.Clip(d.Message, MaxMessageBytes), Line: d.Line, Column: d.Column}
		if d.Severity == jsbundle.SeverityError {
			r.addError(dd)
		} else {
			r.addWarning(dd)
		}
	}
	for _, w := range lintSchema("input_schema", p.inDoc) {
		r.addWarning(w)
	}
	for _, w := range lintSchema("output_schema", p.outDoc) {
		r.addWarning(w)
	}
	if len(p.tests) == 0 {
		r.addWarning(Diagnostic{Code: WarnNoTests, Message: "there are no tests: validation proves only that the source compiles, not what it returns or which syscalls it makes"})
	}
	for i, tc := range p.tests {
		if msg := schemaFinding(p.in, tc.argsV); msg != "" {
			r.addWarning(Diagnostic{Code: WarnArgsSchema, Test: intp(i),
				Message: fmt.Sprintf("test %d: the input schema would reject these args at call time (tests do not exercise schemas): %s", i, msg)})
		}
		if msg := schemaFinding(p.out, tc.expected); tc.expectErr == "" && msg != "" {
			r.addWarning(Diagnostic{Code: WarnExpectedSchema, Test: intp(i),
				Message: fmt.Sprintf("test %d: the output schema would reject this expected value at call time (tests do not exercise schemas): %s", i, msg)})
		}
	}
	if prog == nil {
		return r
	}
	runCtx, cancel := context.WithTimeout(ctx, v.total)
	defer cancel()
	// The budget is judged on the clock, not on runCtx.Err(): the sandbox may see the
	// deadline pass before the context's timer has fired.
	deadline, _ := runCtx.Deadline()
	spent := func() bool { return ctx.Err() == nil && !time.Now().Before(deadline) }
	run := func(i int) testOutcome {
		if spent() {
			return testOutcome{tr: TestResult{Index: i, Error: &Diagnostic{Code: wasm.CodeLimitExceeded, Test: intp(i),
				Message: fmt.Sprintf("test %d: not run: the validation's wall time of %v ran out", i, v.total)}}}
		}
		o := v.runTest(runCtx, prog, i, p.tests[i])
		// Stopped by the validation's budget rather than by the caller: say so,
		// whatever the sandbox called the stop.
		if o.tr.Error != nil && spent() && o.tr.Error.Code != syscalls.CodeTapeMismatch {
			o.tr.Error.Code = wasm.CodeLimitExceeded
			o.tr.Error.Message = liberr.Clip(fmt.Sprintf("test %d: stopped: the validation's wall time of %v ran out", i, v.total), MaxMessageBytes)
		}
		return o
	}
	// Each finished test is a step of the call's progress (engine.ReportProgress).
	// Tests finish in parallel; counting and reporting under one lock keeps the steps
	// in increasing order, as MCP requires of a request's progress values.
	var (
		progressMu sync.Mutex
		finished   int
	)
	one := func(i int) testOutcome {
		o := run(i)
		note := fmt.Sprintf("test %d passed", i)
		if o.tr.Error != nil {
			note = fmt.Sprintf("test %d failed: %s", i, o.tr.Error.Code)
		}
		progressMu.Lock()
		finished++
		engine.ReportProgress(ctx, finished, len(p.tests), note)
		progressMu.Unlock()
		return o
	}
	// Whatever order the tests ran in, the report lists them, their errors and their
	// logs in index order.
	for _, o := range runAll(len(p.tests), v.parallel, one) {
		for _, l := range o.logs {
			if len(r.Logs) >= MaxReportLogs {
				break
			}
			r.Logs = append(r.Logs, l)
		}
		if o.tr.Error != nil {
			r.addError(*o.tr.Error)
		}
		r.Tests = append(r.Tests, o.tr)
	}
	return r
}

// testOutcome is one test's verdict and the console lines its program wrote.
type testOutcome struct {
	tr   TestResult
	logs []LogLine
}

// runAll runs one(0) … one(n-1) on up to parallel goroutines, each taking the next index
// when it is free, and returns the outcomes in index order. A panic in one of them
// panics again in the caller once all have stopped, as it would have without the
// goroutines.
func runAll(n, parallel int, one func(int) testOutcome) []testOutcome {
	out := make([]testOutcome, n)
	if parallel > n {
		parallel = n
	}
	if parallel <= 1 {
		for i := range out {
			out[i] = one(i)
		}
		return out
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked any
	)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					if panicked == nil {
						panicked = p
					}
					mu.Unlock()
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				out[i] = one(i)
			}
		}()
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	return out
}

func intp(i int) *int { return &i }

func (r *Report) addError(d Diagnostic) {
	d.Message = liberr.Clip(d.Message, MaxMessageBytes)
	r.Errors = appendBounded(r.Errors, d, MaxReportErrors)
}

func (r *Report) addWarning(d Diagnostic) {
	d.Message = liberr.Clip(d.Message, MaxMessageBytes)
	r.Warnings = appendBounded(r.Warnings, d, MaxReportWarnings)
}

// appendBounded appends d while there is room; the last slot is a truncation marker.
func appendBounded(list []Diagnostic, d Diagnostic, max int) []Diagnostic {
	switch {
	case len(list) < max-1:
		return append(list, d)
	case len(list) == max-1:
		return append(list, Diagnostic{Code: CodeTruncated, Message: fmt.Sprintf("more than %d findings; the rest are not listed", max-1)})
	}
	return list
}

var printer = message.NewPrinter(language.English)

// schemaFinding validates v against s and describes the first violation, or "".
func schemaFinding(s *jsonschema.Schema, v any) string {
	err := schemaerr.Canonical(s.Validate(v))
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		leaf := ve
		for len(leaf.Causes) > 0 {
			leaf = leaf.Causes[0]
		}
		at := "/" + strings.Join(leaf.InstanceLocation, "/")
		return liberr.Clip(fmt.Sprintf("at %s: %s", at, leaf.ErrorKind.LocalizedString(printer)), 300)
	}
	return liberr.Clip(err.Error(), 300)
}

// runTest runs test i of the candidate under its tape and judges it. It keeps at most
// MaxReportLogs of the program's console lines, as many as a report can hold.
func (v *Validator) runTest(ctx context.Context, prog *jsbundle.Program, i int, tc testCase) (o testOutcome) {
	o.tr = v.judgeTest(ctx, prog, i, tc, &o.logs)
	return o
}

func (v *Validator) judgeTest(ctx context.Context, prog *jsbundle.Program, i int, tc testCase, logs *[]LogLine) TestResult {
	tr := TestResult{Index: i}
	fail := func(code, msg string, entry *int, path string) TestResult {
		tr.Error = &Diagnostic{Code: code, Message: liberr.Clip(fmt.Sprintf("test %d: %s", i, msg), MaxMessageBytes), Test: intp(i), Entry: entry, Path: path}
		return tr
	}
	tape, err := syscalls.NewTape(tc.tape)
	if err != nil {
		// An entry that answers what its route never could is placed: its index and
		// the pointer of the field in the test's syscalls.
		var se *syscalls.Error
		if errors.As(err, &se) && len(se.Details) == 1 {
			var entry int
			field := ""
			if _, scanErr := fmt.Sscanf(se.Details[0].Path, "/%d/", &entry); scanErr == nil {
				field = fmt.Sprintf("/tests/%d/syscalls%s", i, se.Details[0].Path)
				return fail(syscalls.CodeTapeInvalid, syscallText(err), intp(entry), field)
			}
		}
		return fail(syscalls.CodeTapeInvalid, syscallText(err), nil, "")
	}
	res, runErr := v.sandbox.RunDoc(ctx, prog.Source, tc.argsDoc, tape,
		wasm.Options{Limits: v.run, Seed: ValidationSeed})
	if res != nil {
		for _, l := range res.Logs {
			if len(*logs) >= MaxReportLogs {
				break
			}
			*logs = append(*logs, LogLine{Test: i, Level: l.Level, Message: liberr.Clip(l.Message, 512)})
		}
	}
	tapeErr := tape.Finish()
	var te *syscalls.Error
	errors.As(tapeErr, &te)
	entry := intp(tape.Consumed())
	// A tape mismatch outranks the run's own failure, which it usually caused (the
	// program did not catch the rejection); a caught mismatch fails the test too.
	if te != nil && te.Code != syscalls.CodeTapeLeftover {
		return fail(string(te.Code), te.Message, entry, "")
	}
	if tc.expectErr != "" {
		// An expected refusal: the call must fail, with that code, as production
		// would report it (an uncaught refused syscall keeps the syscall's code).
		if te != nil { // leftovers
			return fail(string(te.Code), te.Message, entry, "")
		}
		if runErr == nil {
			tr.Observed = observed(res.Value)
			return fail(CodeExpectedMismatch, fmt.Sprintf("returned a value; expected the refusal %s", tc.expectErr), nil, "")
		}
		if got := string(liberr.CodeOf(runError("the program", runErr, tape.Refusal()))); got != tc.expectErr {
			return fail(CodeExpectedMismatch, fmt.Sprintf("failed with %s; expected the refusal %s: %s", got, tc.expectErr, runErr.Error()), nil, "")
		}
		tr.OK = true
		return tr
	}
	if runErr != nil {
		var we *wasm.Fault
		if errors.As(runErr, &we) {
			msg := we.Message
			if we.Limit != "" {
				msg = we.Limit + ": " + msg
			}
			return fail(we.Code, msg, nil, we.Path)
		}
		return fail(string(CodeToolFailed), runErr.Error(), nil, "")
	}
	if te != nil { // leftovers, after a run that succeeded
		tr.Observed = observed(res.Value)
		return fail(string(te.Code), te.Message, entry, "")
	}
	// The sandbox decoded the result exactly where it left the guest (res.Doc): its
	// value is compared as it is. A result that decoding refused, or nested deeper than
	// a test's value may be, is read again here for the error that says so.
	var got any
	if !res.Doc.IsZero() && res.Doc.Depth() <= jsonexact.DefaultMaxDepth {
		got, err = res.Doc.Value().ToAny(), nil
	} else {
		got, err = jsonexact.DecodeAny(res.Value, 0)
	}
	if err != nil {
		return fail(wasm.CodeNotJSON, "the returned value is not exact JSON: "+err.Error(), nil, "")
	}
	if path, what, same := jsonexact.Diff(tc.expected, got); !same {
		tr.Observed = observed(res.Value)
		msg := fmt.Sprintf("returned value differs from expected at %s: %s", path, what)
		// An expected number no JavaScript number equals makes the test one no
		// program passes: the mismatch says so, rather than blame the program.
		if note := jsonexact.DiffNote(tc.expected); note != "" {
			msg += " (" + note + ")"
		}
		return fail(CodeExpectedMismatch, msg, nil, path)
	}
	tr.OK = true
	return tr
}

// observed keeps a returned value in the report when it is small enough.
func observed(v json.RawMessage) json.RawMessage {
	if len(v) > MaxObservedBytes {
		b, _ := json.Marshal(fmt.Sprintf("(%d bytes of JSON, not kept)", len(v)))
		return b
	}
	return append(json.RawMessage(nil), v...)
}
