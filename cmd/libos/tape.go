package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// openStore opens the store at dir (or --data) alone: tape and replay read it and
// start no kernel, so they write nothing, not even the unknown_settlement records a
// kernel writes for calls a crash left open.
func openStore(e *env, dir string) (*store.Store, error) {
	if dir == "" {
		d, err := e.dataDirectory()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return nil, usageErr("the store %s is in use by another libos (a running 'libos serve'?): stop it, or copy the directory and pass --data COPY", dir)
		}
		return nil, usageErr("cannot open the store %s: %v", dir, err)
	}
	return st, nil
}

// refused reports an export or replay refusal: exit 1, the code naming the reason.
func refused(err error) error {
	if te, ok := liberr.AsLayer(err, tools.Layer); ok && te.Code != tools.CodeStorage {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %s", te.Code, te.Message)}
	}
	return usageErr("%v", err)
}

func newTapeCmd(e *env) *cobra.Command {
	var appendTo, expectHead string
	c := &cobra.Command{
		Use:   "tape PID CALL_ID",
		Short: "Export a settled JIT tool call as a test case {args, expected, syscalls}",
		Long: `tape prints a settled call of a registered JIT tool as a validation test: the call's
arguments, the value it returned as "expected", and every syscall its code made, in order,
with the exact arguments and the result or error the code received, from the call's
syscall journal. It is the tape the call ran on: appended to the candidate's tests, the
call becomes a regression test that 'libos validate' runs.

It refuses, with a code naming the reason and exit status 1: a call that does not exist
(call_not_found), is not settled (call_unsettled), is of a built-in tool (not_jit_tool),
failed (not_replayable), has a journal entry over the image's bound (journal_truncated),
saw data labelled by the image's data-flow rules (export_forbidden), or cannot be said as
a tape (not_replayable, journal_corrupt). Secrets passed by reference stay references.

--append CANDIDATE.json adds the case to the candidate file's "tests" (the candidate's
name must be the call's tool). The store is only read.

` + expectHeadHelp,
		Example: `  libos tape proc_1a2b… call_3c4d…
  libos tape proc_1a2b… call_3c4d… --append tools/candidates/clock_visits.json
  libos tape proc_1a2b… call_3c4d… --expect-head "$(cat head.txt)"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			anchor, err := expectedHead(expectHead)
			if err != nil {
				return err
			}
			st, err := openStore(e, "")
			if err != nil {
				return err
			}
			defer st.Close()
			if err := checkExpectedHead(e, "tape", st, args[0], anchor); err != nil {
				return err
			}
			tc, err := tools.ExportTape(st, args[0], args[1])
			if err != nil {
				return refused(err)
			}
			if appendTo == "" {
				return writeJSON(e.stdout, tc)
			}
			n, err := appendTest(appendTo, args[1], st, args[0], tc)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s: appended the tape of %s as test %d\n", appendTo, args[1], n)
			return nil
		},
	}
	c.Flags().StringVar(&appendTo, "append", "", "add the case to the tests of the candidate file `CANDIDATE.json`")
	c.Flags().StringVar(&expectHead, "expect-head", "", expectHeadFlag)
	_ = c.MarkFlagFilename("append", "json")
	return c
}

// The --expect-head of tape and replay, as 'libos events --verify --expect-head' takes it.
const (
	expectHeadFlag = "fail unless the process's log reaches `SEQ:HASH` (from 'libos events PID --head') with that hash there"
	expectHeadHelp = `A log's hash chain checks itself, not its length: a store cut back to an earlier state
is a shorter log that verifies, whose newest calls are simply gone. --expect-head SEQ:HASH
(a head 'libos events PID --head' printed earlier and kept elsewhere) refuses such a log,
or another one, before anything is read from it: exit status 1 when the log ends before
SEQ or its event SEQ has another hash.`
)

// expectedHead parses --expect-head; nil when it is not given.
func expectedHead(flag string) (*headAnchor, error) {
	if flag == "" {
		return nil, nil
	}
	a, err := parseHeadAnchor(flag)
	if err != nil {
		return nil, usageErr("--expect-head: %v", err)
	}
	return &a, nil
}

// checkExpectedHead judges pid's log in st against the anchor of --expect-head, if any:
// exit 1 with the reason when it does not hold it, exit 2 on a damaged store. An unknown
// process is left to the command, which refuses it with its own code.
func checkExpectedHead(e *env, command string, st *store.Store, pid string, a *headAnchor) error {
	if a == nil {
		return nil
	}
	if _, err := st.Process(pid); errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
		return nil
	}
	err := a.checkStore(st, pid)
	var broken *store.VerifyError
	if errors.As(err, &broken) {
		fmt.Fprintf(e.stderr, "libos %s: %v\n", command, err)
		return failed()
	}
	return err // nil, or a damaged store: exit 2, as from 'libos events --verify'
}

// appendTest adds tc to the "tests" of the candidate in file and rewrites the file,
// keeping its other fields as they are. It returns the index of the new test.
func appendTest(file, callID string, st *store.Store, pid string, tc tools.TestCase) (int, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, usageErr("--append: %v", err)
	}
	c, err := tools.ParseCandidate(raw)
	if err != nil {
		return 0, usageErr("--append: %s is not a candidate: %v", file, err)
	}
	tool, err := tools.CallTool(st, pid, callID)
	if err != nil {
		return 0, refused(err)
	}
	if c.Name != tool {
		return 0, usageErr("--append: %s is the candidate %q; call %s is of %q", file, c.Name, callID, tool)
	}
	// Decoded with the field order kept, so that the rewrite changes only "tests".
	var fields []jsonField
	if fields, err = objectFields(raw); err != nil {
		return 0, usageErr("--append: %s: %v", file, err)
	}
	var tests []json.RawMessage
	if len(c.Tests) > 0 {
		if err := json.Unmarshal(c.Tests, &tests); err != nil {
			return 0, usageErr("--append: %s: tests: %v", file, err)
		}
	}
	one, err := json.Marshal(tc)
	if err != nil {
		return 0, usageErr("--append: %v", err)
	}
	tests = append(tests, one)
	all, _ := json.Marshal(tests)
	found := false
	for i := range fields {
		if fields[i].key == "tests" {
			fields[i].value, found = all, true
		}
	}
	if !found {
		fields = append(fields, jsonField{key: "tests", value: all})
	}
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, f := range fields {
		if i > 0 {
			buf.WriteString(",")
		}
		k, _ := json.Marshal(f.key)
		buf.Write(k)
		buf.WriteString(":")
		buf.Write(f.value)
	}
	buf.WriteString("}")
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return 0, usageErr("--append: %v", err)
	}
	out.WriteString("\n")
	if _, err := tools.ParseCandidate(out.Bytes()); err != nil {
		return 0, usageErr("--append: the candidate with the new test would not parse: %v", err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return 0, usageErr("--append: %v", err)
	}
	// Written beside the file and renamed over it: a failure leaves the old file whole.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), fi.Mode().Perm()); err != nil {
		return 0, usageErr("--append: %v", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return 0, usageErr("--append: %v", err)
	}
	return len(tests) - 1, nil
}

type jsonField struct {
	key   string
	value json.RawMessage
}

// objectFields splits a JSON object into its members, in order.
func objectFields(raw []byte) ([]jsonField, error) {
	if _, err := jsonexact.DecodeAny(raw, 0); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []jsonField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, jsonField{key: k, value: v})
	}
	return out, nil
}

type replayFlags struct {
	all       bool
	since     string
	candidate string
	asJSON    bool
	head      string
}

func newReplayCmd(e *env) *cobra.Command {
	var f replayFlags
	c := &cobra.Command{
		Use:   "replay PID CALL_ID | PID --all [--since T]",
		Short: "Run stored JIT tool calls again against their journals and compare",
		Long: `replay runs the code of a registered JIT tool again, in the sandbox, on the tape of one of
its settled calls (the call's arguments, its syscall journal, its Math.random seed; no
ambient clock, as in production): no provider is touched and nothing is written. It prints "same", or the
first difference — the result, the order of the syscalls, or a syscall's arguments — as a
diff of the recorded and the replayed side. Run it before and after changing the engine,
the QuickJS build or the prelude: the same store gives the same report, byte for byte, on
every machine.

--all replays every JIT tool call of the process (--since T: opened at or after T, RFC
3339 or YYYY-MM-DD) and ends with "N same, N different, N not replayable".
--candidate FILE replays the candidate's source instead of the registered code: the calls
of the tool of that name, run by the changed code.

` + expectHeadHelp + `

Exit status: 0 when nothing differs (with --all, calls that are not replayable are listed
and counted), 1 when a call differs, the one call asked for is not replayable or the log
does not hold the expected head, 2 on usage or storage errors.`,
		Example: `  libos replay proc_1a2b… call_3c4d…
  libos replay proc_1a2b… --all --since 2026-01-01
  libos replay proc_1a2b… --all --candidate clock_visits.json
  libos replay proc_1a2b… --all --expect-head "$(cat head.txt)"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.all {
				return cobra.ExactArgs(1)(cmd, args)
			}
			if f.since != "" {
				return usageErr("--since needs --all")
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return replay(cmd.Context(), e, f, args)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&f.all, "all", false, "replay every JIT tool call of the process")
	fl.StringVar(&f.since, "since", "", "with --all, only calls opened at or after `T` (RFC 3339 or YYYY-MM-DD)")
	fl.StringVar(&f.candidate, "candidate", "", "replay the source of the candidate `FILE` instead of the registered code")
	fl.BoolVar(&f.asJSON, "json", false, "print the results as JSON")
	fl.StringVar(&f.head, "expect-head", "", expectHeadFlag)
	_ = c.MarkFlagFilename("candidate", "json")
	return c
}

// openReplay opens what a replay runs on: the store in dir (the data directory when
// dir is "") and a sandbox. closeAll releases both, the sandbox first.
func openReplay(ctx context.Context, e *env, dir string) (st *store.Store, sb *wasm.Engine, closeAll func(), err error) {
	if st, err = openStore(e, dir); err != nil {
		return nil, nil, nil, err
	}
	if sb, err = newSandbox(ctx, e); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, sb, func() {
		sb.Close(context.Background())
		st.Close()
	}, nil
}

func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErr("--since %q: want RFC 3339 (2026-01-02T03:04:05Z) or YYYY-MM-DD", s)
}

func replay(ctx context.Context, e *env, f replayFlags, args []string) error {
	opts := tools.ReplayOptions{}
	var err error
	if opts.Since, err = parseSince(f.since); err != nil {
		return err
	}
	anchor, err := expectedHead(f.head)
	if err != nil {
		return err
	}
	if f.candidate != "" {
		raw, err := os.ReadFile(f.candidate)
		if err != nil {
			return usageErr("--candidate: %v", err)
		}
		c, err := tools.ParseCandidate(raw)
		if err != nil {
			return usageErr("--candidate: %s is not a candidate: %v", f.candidate, err)
		}
		opts.Source, opts.OutputSchema, opts.Tool = c.SourceCode, c.OutputSchema, c.Name
	}
	st, sb, closeAll, err := openReplay(ctx, e, "")
	if err != nil {
		return err
	}
	defer closeAll()
	if err := checkExpectedHead(e, "replay", st, args[0], anchor); err != nil {
		return err
	}

	var results []tools.ReplayResult
	if f.all {
		if results, err = tools.ReplayAll(ctx, st, sb, args[0], opts); err != nil {
			return refused(err)
		}
	} else {
		r, err := tools.Replay(ctx, st, sb, args[0], args[1], opts)
		if err != nil {
			return refused(err)
		}
		if opts.Tool != "" && r.Tool != opts.Tool {
			return usageErr("--candidate: %s is the candidate %q; call %s is of %q", f.candidate, opts.Tool, args[1], r.Tool)
		}
		results = []tools.ReplayResult{r}
	}
	if f.asJSON {
		out := struct {
			Results []tools.ReplayResult `json:"results"`
			Summary string               `json:"summary"`
		}{results, tools.Summary(results)}
		if out.Results == nil {
			out.Results = []tools.ReplayResult{}
		}
		if err := writeJSON(e.stdout, out); err != nil {
			return usageErr("%v", err)
		}
	} else {
		var b strings.Builder
		for _, r := range results {
			b.WriteString(r.Text())
			b.WriteString("\n")
		}
		if f.all {
			b.WriteString(tools.Summary(results) + "\n")
		}
		fmt.Fprint(e.stdout, b.String())
	}
	for _, r := range results {
		if r.Verdict == tools.VerdictDifferent || (!f.all && r.Verdict == tools.VerdictNotReplayable) {
			return failed()
		}
	}
	return nil
}

// CodeReplayDifferent is the error code of a candidate whose code replays a stored
// call of its tool differently (libos test --replay-store).
const CodeReplayDifferent = "replay_different"

func newTestCmd(e *env) *cobra.Command {
	var f validateFlags
	c := &cobra.Command{
		Use:   "test FILE|DIR... [--replay-store DIR]",
		Short: "Run candidates' tests, and replay stored calls of their tools with their code",
		Long: `test runs what 'libos validate' runs on each candidate file (the proposal checks, the
static checks, the schema lint and every test on its tape), with the same report formats
(--json, --junit FILE) and exit codes. With --replay-store DIR it also replays, with the
candidate's code, every stored call of the tool of the candidate's name in every process
of the store in DIR (read only; a copy of a production store will do): a call the new
code replays differently fails the candidate (replay_different, with the diff); a call
that cannot be replayed is listed as skipped.

A CI recipe: snapshot the production store, export the calls that matter as tests
('libos tape PID CALL_ID --append tools/candidates/NAME.json') and commit them; in CI run
'libos test tools/candidates/ --replay-store SNAPSHOT --junit report.xml'.

Exit status: 0 when every candidate is ok, 1 when any is rejected or replays differently,
2 on usage or I/O errors.`,
		Example: `  libos test tools/candidates/
  libos test tools/candidates/ --replay-store /backups/libos-store --junit report.xml`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: map[string]string{ownGCTarget: "validateGCPercent without a store"},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.title = "libos test"
			return validate(cmd.Context(), e, f, args)
		},
	}
	f.reportFlags(c)
	c.Flags().StringVar(&f.replayStore, "replay-store", "", "also replay the stored calls of each candidate's tool in the store in `DIR`")
	_ = c.MarkFlagDirname("replay-store")
	return c
}

// replayStored replays, for every candidate that parses, the stored calls of its
// tool in every process of the store in dir with its code, and adds the verdicts to
// its result: a difference rejects the candidate.
func replayStored(ctx context.Context, e *env, dir string, raws [][]byte, results []candidateResult) error {
	if _, err := os.Stat(dir); err != nil {
		return usageErr("--replay-store: %v", err)
	}
	st, sb, closeAll, err := openReplay(ctx, e, dir)
	if err != nil {
		return err
	}
	defer closeAll()
	procs, err := st.Processes()
	if err != nil {
		return usageErr("--replay-store: %v", err)
	}
	for i := range results {
		c, err := tools.ParseCandidate(raws[i])
		if err != nil {
			continue
		}
		opts := tools.ReplayOptions{Source: c.SourceCode, OutputSchema: c.OutputSchema, Tool: c.Name}
		for _, p := range procs {
			rs, err := tools.ReplayAll(ctx, st, sb, p.PID, opts)
			if err != nil {
				return usageErr("--replay-store: %v", err)
			}
			for _, r := range rs {
				results[i].Replays = append(results[i].Replays, r)
				if r.Verdict == tools.VerdictDifferent {
					results[i].OK = false
					results[i].Errors = append(results[i].Errors, tools.Diagnostic{Code: CodeReplayDifferent,
						Message: fmt.Sprintf("the stored call %s of %s replays differently: %s", r.CallID, r.PID, oneLine(r))})
				}
			}
		}
	}
	return nil
}

// oneLine is a replay's difference on one line.
func oneLine(r tools.ReplayResult) string {
	if r.Diff == nil {
		return r.Verdict
	}
	s := r.Diff.Kind
	if r.Diff.Syscall != nil {
		s = fmt.Sprintf("syscall %d: %s", *r.Diff.Syscall, s)
	}
	if r.Diff.Path != "" && r.Diff.Path != "$" {
		s += " at " + r.Diff.Path
	}
	return s + ": recorded " + r.Diff.Recorded + ", replayed " + r.Diff.Replayed
}
