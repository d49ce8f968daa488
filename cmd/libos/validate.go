package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	los "github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/regfile"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/tools"
)

type validateFlags struct {
	asJSON  bool
	junit   string
	store   string
	verbose bool
	// replayStore is `libos test --replay-store DIR`: the stored calls of each
	// candidate's tool are replayed with the candidate's code.
	replayStore string
	title       string // of the JUnit report
}

func newValidateCmd(e *env) *cobra.Command {
	var f validateFlags
	c := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Validate JIT tool candidates, as validate_jit_tool does (for CI)",
		Long: `validate reads JIT tool candidates, JSON files with the fields of propose_jit_tool (name,
description, source_code, input_schema, output_schema, tests), and runs on each exactly
what propose_jit_tool and validate_jit_tool do: the proposal checks, the static checks
of the TypeScript source, the schema portability lint (warnings), and every test in the
sandbox with its syscall tape. A directory stands for every *.json file in it, in name
order. No store is needed.

The report is like 'go test': one line per test, each diagnostic as
"FILE: source_code:LINE:COLUMN: error: CODE: message" (the line and column count in the
candidate's source_code string, the TypeScript program, not in the JSON file), and a
closing line "N passed, N failed" counting candidates. --json prints the full
structured result instead, where "line" and "column" (1-based) are likewise positions
in source_code; --junit FILE also writes JUnit XML for CI systems. The output is
identical on every run.

With --store DIR, each candidate is also proposed and validated by a fresh process in
that store, through the real tools, so the evidence is durable and auditable
('libos candidates PID').

Only regular files are read (a FIFO or a device is refused), each at most 4 MiB. In the
text report every string from a candidate is escaped, so it cannot pose as a report line
or reach the terminal as a control sequence.

Exit status: 0 when every candidate is ok, 1 when any is rejected, 2 on usage or I/O
errors (a missing file, a file that is not regular or too large, an unwritable --junit
path) and when SIGINT or SIGTERM stops the run, which then prints no report.`,
		Example: `  libos validate testdata/candidates/good_clock_now.json
  libos validate tools/candidates/ --junit report.xml
  libos validate my_tool.json --json | jq '.candidates[0].errors'`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: map[string]string{ownGCTarget: "validateGCPercent without a store"},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return validate(cmd.Context(), e, f, args)
		},
	}
	f.reportFlags(c)
	c.Flags().StringVar(&f.store, "store", "", "also propose and validate each candidate in a fresh process of the store in DIR")
	_ = c.MarkFlagDirname("store")
	return c
}

// reportFlags declares the report flags validate and test share (--json, --junit,
// --verbose): one report, so one set of flags with one meaning.
func (f *validateFlags) reportFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the full result as one JSON object")
	fl.StringVar(&f.junit, "junit", "", "also write a JUnit XML report to FILE")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "also print the console output of the tests")
	_ = c.MarkFlagFilename("junit", "xml")
}

// candidateResult is one candidate in the report; the JSON names are the documented
// --json format.
type candidateResult struct {
	File     string           `json:"file"`
	Name     string           `json:"name"`
	OK       bool             `json:"ok"`
	Errors   []los.Diagnostic `json:"errors"`
	Warnings []los.Diagnostic `json:"warnings"`
	Tests    []testResult     `json:"tests"`
	Logs     []los.LogLine    `json:"logs"`
	// PID and CandidateID name the durable record, with --store.
	PID         string `json:"pid,omitempty"`
	CandidateID string `json:"candidate_id,omitempty"`
	// Replays are the stored calls of the candidate's tool run again with its code
	// (libos test --replay-store).
	Replays []tools.ReplayResult `json:"replays,omitempty"`
}

type testResult struct {
	Index    int             `json:"index"`
	OK       bool            `json:"ok"`
	Error    *los.Diagnostic `json:"error"`
	Observed json.RawMessage `json:"observed,omitempty"`
}

type validateReport struct {
	Candidates []candidateResult `json:"candidates"`
	Passed     int               `json:"passed"`
	Failed     int               `json:"failed"`
	title      string
}

// maxCandidateFileBytes bounds one candidate file. A candidate holds at most a 64 KiB
// source and bounded schemas and tests; a larger file is not one, and reading it whole
// (or a device that never ends) would only grow the heap.
const maxCandidateFileBytes = 4 << 20

// expandArgs turns FILE|DIR arguments into files: a directory is its *.json files
// in name order. Only regular files are candidates (symbolic links to them included): a
// FIFO blocks its reader, and a device such as /dev/zero never ends.
func expandArgs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return nil, usageErr("%s: not a regular file (%s); a candidate is a JSON file", printable(a), regfile.Kind(fi.Mode()))
			}
			files = append(files, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		var names []string
		for _, de := range ents {
			if de.IsDir() || !strings.HasSuffix(de.Name(), ".json") {
				continue
			}
			fi, err := os.Stat(filepath.Join(a, de.Name()))
			if err != nil {
				return nil, usageErr("%v", err)
			}
			if !fi.Mode().IsRegular() {
				return nil, usageErr("%s: not a regular file (%s); a candidate is a JSON file", printable(filepath.Join(a, de.Name())), regfile.Kind(fi.Mode()))
			}
			names = append(names, de.Name())
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, usageErr("%s: no *.json candidate files in this directory", a)
		}
		for _, n := range names {
			files = append(files, filepath.Join(a, n))
		}
	}
	return files, nil
}

// validateGCPercent is the garbage collector's target while a store-free validate runs.
// Its live heap is 2-3 MB (the decoded guest, the schemas, the candidate), and with the
// default target a one-file validate, a process of a tenth of a second, collected three
// times; at 400 the first collection waits for 16 MB of heap, which such a validate never
// reaches, while a directory of candidates still collects at five times its live heap.
const validateGCPercent = 400

// validator runs one candidate: through the store-free Validator, or with --store
// through the real propose and validate tools of a process.
type validator func(ctx context.Context, c los.Candidate, raw []byte) (los.Report, string, string, error)

func validate(ctx context.Context, e *env, f validateFlags, args []string) error {
	files, err := expandArgs(args)
	if err != nil {
		return err
	}
	// Read every file first: an unreadable file is an I/O error, reported before any
	// work and with exit status 2.
	raws := make([][]byte, len(files))
	for i, file := range files {
		if err := ctx.Err(); err != nil {
			return interrupted(ctx)
		}
		if raws[i], err = readCandidateFile(file); err != nil {
			return err
		}
	}
	var run validator
	workers := runtime.GOMAXPROCS(0)
	gcTarget := defaultGCPercent
	if f.store == "" {
		gcTarget = validateGCPercent
	}
	// See ownGCTarget and validateGCPercent. Restored on return for the tests that call
	// run in process.
	defer useGC(gcTarget)()
	if f.store == "" {
		// The validator's default fixed clock keeps the reports identical from run to run.
		opts := los.ValidatorOptions{}
		if len(files) == 1 {
			// One candidate in a process that exits after it: its tests run one after
			// another on one instance, which costs no time for a few small tests and
			// keeps a second guest memory out of the peak RSS.
			opts.Parallel, opts.PoolSize = 1, 1
		}
		// The sandbox starts on its own goroutine while this one does the candidates'
		// checks that need none (los.Precheck): the compile of the TypeScript overlaps
		// the compiled guest's load instead of following it.
		var v *los.Validator
		started := make(chan struct{})
		go func() {
			defer close(started)
			opts.CacheDir, opts.OnCacheUnusable = e.cacheDirectory(), e.cacheUnusable
			v, err = los.NewValidator(ctx, opts)
		}()
		precheck(raws, started)
		<-started
		if err != nil {
			return usageErr("cannot start the sandbox: %v", err)
		}
		defer v.Close()
		if v.Prestarted() {
			e.log.Debug(prestartedSandbox)
		}
		run = func(ctx context.Context, c los.Candidate, _ []byte) (los.Report, string, string, error) {
			return v.ValidateCandidate(ctx, c), "", "", nil
		}
	} else {
		sys, err := openSystem(ctx, f.store, e, readWrite)
		if err != nil {
			return err
		}
		defer sys.Close()
		run = storeValidator(e, sys)
		workers = 1
	}

	results := make([]candidateResult, len(files))
	progress := newProgress(e.stderr, len(files))
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := validateOne(ctx, run, files[i], raws[i])
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
				results[i] = r
				progress.step(files[i])
			}
		}()
	}
	for i := range files {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	progress.done()
	// A signal stops the run wherever it was; a report of a part would read as a
	// verdict on all.
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	if firstErr != nil {
		return firstErr
	}

	if f.replayStore != "" {
		if err := replayStored(ctx, e, f.replayStore, raws, results); err != nil {
			return err
		}
	}

	rep := validateReport{Candidates: results, title: f.title}
	for _, r := range results {
		if r.OK {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	if f.asJSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return usageErr("%v", err)
		}
	} else {
		printValidateReport(e.stdout, rep, f.verbose)
	}
	if f.junit != "" {
		if err := writeJUnit(f.junit, rep); err != nil {
			return usageErr("--junit: %v", err)
		}
	}
	if rep.Failed > 0 {
		return failed()
	}
	return nil
}

// maxPrechecked bounds how many candidates precheck does while the sandbox starts: a
// few take as long as the start, and the memos that keep the results hold 64 sources.
const maxPrechecked = 16

// precheck runs los.Precheck on the candidates in raws, in order, until started is
// closed. It only fills the caches the validations read (their reports are the same
// with or without it), so a file that is not a candidate is skipped here and reported
// by the validation.
func precheck(raws [][]byte, started <-chan struct{}) {
	for i, raw := range raws {
		if i == maxPrechecked {
			return
		}
		select {
		case <-started:
			return
		default:
		}
		if c, err := los.ParseCandidate(raw); err == nil {
			los.Precheck(c)
		}
	}
}

// readCandidateFile reads a candidate file that expandArgs found regular. It opens
// without blocking and checks the opened file again, so a file replaced by a FIFO or a
// device in between cannot hang or flood the run, and it reads at most
// maxCandidateFileBytes.
func readCandidateFile(file string) ([]byte, error) {
	b, err := regfile.Read(file, maxCandidateFileBytes)
	var notReg *regfile.NotRegularError
	var tooLarge *regfile.TooLargeError
	switch {
	case errors.As(err, &notReg):
		return nil, usageErr("%s: not a regular file (%s); a candidate is a JSON file", printable(file), notReg.Kind)
	case errors.As(err, &tooLarge) && tooLarge.Size >= 0:
		return nil, usageErr("%s: %d bytes, more than the %d-byte limit of a candidate file", printable(file), tooLarge.Size, maxCandidateFileBytes)
	case errors.As(err, &tooLarge):
		return nil, usageErr("%s: more than the %d-byte limit of a candidate file", printable(file), maxCandidateFileBytes)
	case err != nil:
		return nil, usageErr("%v", err)
	}
	return b, nil
}

// interrupted is the outcome of a run stopped by SIGINT or SIGTERM: no report, exit 2.
func interrupted(ctx context.Context) error {
	return usageErr("validate: interrupted (%v); no report was written", context.Cause(ctx))
}

func validateOne(ctx context.Context, run validator, file string, raw []byte) (candidateResult, error) {
	r := candidateResult{File: file, Errors: []los.Diagnostic{}, Warnings: []los.Diagnostic{}, Tests: []testResult{}, Logs: []los.LogLine{}}
	c, err := los.ParseCandidate(raw)
	if err != nil {
		// A file that is not a candidate is a rejected candidate, as a malformed
		// proposal is: its code says why.
		r.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		r.Errors = append(r.Errors, los.Diagnostic{Code: string(liberr.CodeOr(err, "invalid_request")), Message: err.Error()})
		return r, nil
	}
	r.Name = c.Name
	rep, pid, cid, err := run(ctx, c, raw)
	if err != nil {
		return r, err
	}
	r.PID, r.CandidateID = pid, cid
	r.OK = rep.OK
	r.Errors = append(r.Errors, rep.Errors...)
	r.Warnings = append(r.Warnings, rep.Warnings...)
	r.Logs = append(r.Logs, rep.Logs...)
	for _, t := range rep.Tests {
		r.Tests = append(r.Tests, testResult{Index: t.Index, OK: t.OK, Error: t.Error, Observed: t.Observed})
	}
	return r, nil
}

// position renders a diagnostic's place. A diagnostic's line and column count in the
// candidate's source_code (the TypeScript program), not in the JSON file that holds it,
// so they are printed after the field's name: "FILE: source_code:LINE:COLUMN". A
// diagnostic with no position is placed at FILE.
func position(file string, d los.Diagnostic) string {
	if d.Line > 0 {
		return fmt.Sprintf("%s: source_code:%d:%d", file, d.Line, d.Column)
	}
	return file
}

// textPosition is position for the text report, with the file as fileText prints it.
func textPosition(file string, d los.Diagnostic) string {
	if d.Line > 0 {
		return fmt.Sprintf("%s: source_code:%d:%d", fileText(file), d.Line, d.Column)
	}
	return fileText(file)
}

func where(d los.Diagnostic) string {
	var parts []string
	if d.Test != nil {
		parts = append(parts, fmt.Sprintf("test %d", *d.Test))
	}
	if d.Entry != nil {
		parts = append(parts, fmt.Sprintf("syscall %d", *d.Entry))
	}
	if d.Path != "" {
		parts = append(parts, "at "+d.Path)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// printValidateReport prints the text report. Every string that comes from a candidate
// or its file passes through printable (or fileText at the start of a line), so only
// the report's own lines start a line.
func printValidateReport(w io.Writer, rep validateReport, verbose bool) {
	for _, c := range rep.Candidates {
		name, file := printable(c.Name), fileText(c.File)
		fmt.Fprintf(w, "=== CANDIDATE %s %s\n", name, file)
		// Findings about one test are printed under that test's line; the others
		// (proposal and static checks, the lint) come first.
		byTest := map[int][]string{}
		hasTest := map[int]bool{}
		for _, t := range c.Tests {
			hasTest[t.Index] = true
		}
		for _, list := range []struct {
			sev   string
			diags []los.Diagnostic
		}{{"error", c.Errors}, {"warning", c.Warnings}} {
			for _, d := range list.diags {
				line := fmt.Sprintf("%s: %s: %s: %s%s", textPosition(c.File, d), list.sev, printable(d.Code), printable(d.Message), printable(where(d)))
				if d.Test != nil && hasTest[*d.Test] {
					byTest[*d.Test] = append(byTest[*d.Test], line)
					continue
				}
				fmt.Fprintln(w, line)
			}
		}
		for _, t := range c.Tests {
			if t.OK {
				fmt.Fprintf(w, "--- PASS: %s/test_%d\n", name, t.Index)
			} else {
				fmt.Fprintf(w, "--- FAIL: %s/test_%d\n", name, t.Index)
			}
			for _, line := range byTest[t.Index] {
				fmt.Fprintf(w, "    %s\n", line)
			}
			if !t.OK && len(t.Observed) > 0 {
				fmt.Fprintf(w, "    observed: %s\n", printable(string(t.Observed)))
			}
			if verbose {
				for _, l := range c.Logs {
					if l.Test == t.Index {
						fmt.Fprintf(w, "    console.%s: %s\n", printable(l.Level), printable(l.Message))
					}
				}
			}
		}
		status := "ok  "
		if !c.OK {
			status = "FAIL"
		}
		extra := ""
		if c.CandidateID != "" {
			extra = fmt.Sprintf(" (%s in %s)", c.CandidateID, c.PID)
		}
		for _, r := range c.Replays {
			verdict := map[string]string{tools.VerdictSame: "PASS", tools.VerdictDifferent: "FAIL", tools.VerdictNotReplayable: "SKIP"}[r.Verdict]
			fmt.Fprintf(w, "--- %s: %s/replay %s %s\n", verdict, name, printable(r.PID), printable(r.CallID))
			if r.Verdict != tools.VerdictSame {
				_, detail, _ := strings.Cut(r.Text(), ": "+r.Verdict)
				detail = strings.TrimPrefix(strings.TrimPrefix(detail, ": "), "\n")
				for _, line := range strings.Split(detail, "\n") {
					fmt.Fprintf(w, "    %s\n", printable(strings.TrimPrefix(line, "  ")))
				}
			}
		}
		fmt.Fprintf(w, "%s %s %s%s\n", status, name, file, extra)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", rep.Passed, rep.Failed)
}

// JUnit XML: one testsuite per candidate, one testcase per test, plus a "checks"
// testcase carrying the errors that come before any test runs.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
	Out      string      `xml:"system-out,omitempty"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, rep validateReport) error {
	out := junitSuites{Name: "libos validate"}
	if rep.title != "" {
		out.Name = rep.title
	}
	for _, c := range rep.Candidates {
		s := junitSuite{Name: c.Name, File: c.File}
		var checks strings.Builder
		for _, d := range c.Errors {
			fmt.Fprintf(&checks, "%s: error: %s: %s%s\n", position(c.File, d), d.Code, d.Message, where(d))
		}
		var warnings strings.Builder
		for _, d := range c.Warnings {
			fmt.Fprintf(&warnings, "%s: warning: %s: %s%s\n", position(c.File, d), d.Code, d.Message, where(d))
		}
		s.Out = warnings.String()
		// Errors that are not a test's own (static checks, proposal checks) fail the
		// "checks" case; a candidate always has it, so a passing one shows too.
		tc := junitCase{Name: "checks", Classname: c.Name, File: c.File}
		var ownErrors []los.Diagnostic
		for _, d := range c.Errors {
			if d.Test == nil {
				ownErrors = append(ownErrors, d)
			}
		}
		if len(ownErrors) > 0 {
			tc.Failure = &junitFailure{Message: ownErrors[0].Code + ": " + ownErrors[0].Message, Type: ownErrors[0].Code, Text: checks.String()}
		}
		s.Cases = append(s.Cases, tc)
		for _, t := range c.Tests {
			tc := junitCase{Name: fmt.Sprintf("test_%d", t.Index), Classname: c.Name, File: c.File}
			if !t.OK {
				f := &junitFailure{Type: "test_failed", Message: "test failed"}
				if t.Error != nil {
					f.Type, f.Message = t.Error.Code, t.Error.Code+": "+t.Error.Message
					f.Text = fmt.Sprintf("%s: %s: %s\n", position(c.File, *t.Error), t.Error.Code, t.Error.Message)
				}
				if len(t.Observed) > 0 {
					f.Text += "observed: " + string(t.Observed) + "\n"
				}
				tc.Failure = f
			}
			s.Cases = append(s.Cases, tc)
		}
		for _, r := range c.Replays {
			tc := junitCase{Name: "replay " + r.PID + " " + r.CallID, Classname: c.Name, File: c.File}
			switch r.Verdict {
			case tools.VerdictDifferent:
				tc.Failure = &junitFailure{Type: "replay_different", Message: "replay differs", Text: r.Text() + "\n"}
			case tools.VerdictNotReplayable:
				tc.Skipped = &junitSkipped{Message: r.Code + ": " + r.Reason}
			}
			s.Cases = append(s.Cases, tc)
		}
		// A candidate rejected for a reason no case above carries (for instance a
		// test error reported only in the list of errors) still fails its suite.
		failedCases := 0
		for _, tc := range s.Cases {
			if tc.Failure != nil {
				failedCases++
			}
		}
		if !c.OK && failedCases == 0 {
			s.Cases[0].Failure = &junitFailure{Message: "candidate rejected", Type: "rejected", Text: checks.String()}
			failedCases = 1
		}
		s.Tests, s.Failures = len(s.Cases), failedCases
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Suites = append(out.Suites, s)
	}
	b, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

// progress shows "validating i/n" on a terminal; elsewhere it stays silent so CI logs
// and redirected output carry only the report.
type progress struct {
	w     io.Writer
	tty   bool
	n     int
	mu    sync.Mutex
	count int
}

func newProgress(w io.Writer, n int) *progress {
	p := &progress{w: w, n: n}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = n > 1
		}
	}
	return p
}

func (p *progress) step(file string) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	fmt.Fprintf(p.w, "\r\033[Kvalidating %d/%d %s", p.count, p.n, fileText(file))
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// storeValidator proposes and validates each candidate in one fresh process of the
// store, through the host API: the same tools a model calls, with the same records.
func storeValidator(e *env, sys *system) validator {
	var pid string
	return func(ctx context.Context, c los.Candidate, raw []byte) (los.Report, string, string, error) {
		if pid == "" {
			p, err := sys.spawnImage(ctx, "", engine.Direct)
			if err != nil {
				return los.Report{}, "", "", err
			}
			pid = p
			e.log.Info("validating in a fresh process", "pid", pid, "store", sys.dir)
		}
		reject := func(err error) los.Report {
			msg := err.Error()
			var ee *engine.Error
			if errors.As(err, &ee) {
				msg = ee.Message
			}
			return los.Report{Errors: []los.Diagnostic{{Code: string(liberr.CodeOr(err, liberr.CodeToolFailed)), Message: msg}}}
		}
		res, err := sys.k.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", raw)
		if err != nil {
			if liberr.CodeOf(err) == engine.CodeStorage {
				return los.Report{}, pid, "", usageErr("--store: %v", err)
			}
			return reject(err), pid, "", nil
		}
		var proposed struct {
			CandidateID string `json:"candidate_id"`
		}
		if err := json.Unmarshal(res.Structured, &proposed); err != nil {
			return los.Report{}, pid, "", usageErr("--store: propose_jit_tool answered %s", res.Structured)
		}
		args, _ := json.Marshal(proposed)
		res, err = sys.k.Runtime().Tools.Call(ctx, pid, "validate_jit_tool", args)
		if err != nil {
			if liberr.CodeOf(err) == engine.CodeStorage {
				return los.Report{}, pid, proposed.CandidateID, usageErr("--store: %v", err)
			}
			return reject(err), pid, proposed.CandidateID, nil
		}
		var rep los.Report
		if err := json.Unmarshal(res.Structured, &rep); err != nil {
			return los.Report{}, pid, proposed.CandidateID, usageErr("--store: validate_jit_tool answered %s", res.Structured)
		}
		return rep, pid, proposed.CandidateID, nil
	}
}
