package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// TestProposeRefusals: every propose_jit_tool check has its own typed error, and a
// refused proposal persists no candidate.
func TestProposeRefusals(t *testing.T) {
	w := openWorld(t, t.TempDir(), tools.Config{Limits: tools.Limits{MaxDescriptionBytes: 64, MaxTests: 2, MaxTapeEntries: 1}})
	pid := w.spawn(t, engine.Direct)
	good := candidateJSON(t, "good_clock_now.json")
	long := strings.Repeat("d", 65)
	cases := []struct {
		rule string
		args string
		code string
	}{
		{"name matches ^[A-Za-z0-9_-]{1,64}$", withField(t, good, "name", `"clock now"`), "invalid_name"},
		{"name is at most 64 characters", withField(t, good, "name", jsonString(strings.Repeat("a", 65))), "invalid_name"},
		{"name is not empty", withField(t, good, "name", `""`), "invalid_name"},
		{"never use reserved multiplexed name run_jit_tool", withField(t, good, "name", `"run_jit_tool"`), "reserved_name"},
		{"avoid process tool names (a built-in)", withField(t, good, "name", `"echo"`), "name_conflict"},
		{"avoid process tool names (a lifecycle tool)", withField(t, good, "name", `"register_jit_tool"`), "name_conflict"},
		{"avoid process tool names under Unicode case folding (Echo)", withField(t, good, "name", `"Echo"`), "name_conflict"},
		{"avoid process tool names under Unicode case folding (ECHO)", withField(t, good, "name", `"ECHO"`), "name_conflict"},
		{"avoid process tool names under Unicode case folding (a lifecycle tool)", withField(t, good, "name", `"Register_JIT_Tool"`), "name_conflict"},
		{"a name is exact: no surrounding white space", withField(t, good, "name", `" clock_now"`), "invalid_name"},
		{"a name is exact: no Unicode space", withField(t, good, "name", `"clock_now\u3000"`), "invalid_name"},
		{"bounded description size (configured 64 bytes)", withField(t, good, "description", jsonString(long)), "limit_exceeded"},
		{"a description says what the tool does", withField(t, good, "description", `"  "`), "invalid_request"},
		{"bounded number of tests (configured 2)", withField(t, good, "tests", `[{"args":{},"expected":1,"syscalls":[]},{"args":{},"expected":1,"syscalls":[]},{"args":{},"expected":1,"syscalls":[]}]`), "limit_exceeded"},
		{"bounded tape per test (configured 1)", withField(t, good, "tests", `[{"args":{},"expected":1,"syscalls":[{"name":"clock.now","result":{}},{"name":"clock.now","result":{}}]}]`), "limit_exceeded"},
		{"schemas compile as JSON Schema 2020-12", withField(t, good, "output_schema", `{"type":5}`), "invalid_schema"},
		{"no remote $ref loading", withField(t, good, "output_schema", `{"$ref":"https://example.com/schema.json"}`), "invalid_schema"},
		{"no local file $ref loading", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`), "invalid_schema"},
		{"only 2020-12", withField(t, good, "input_schema", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`), "invalid_schema"},
		{"the input schema's root accepts objects", withField(t, good, "input_schema", `{"type":"array"}`), "invalid_schema"},
		// SEP-2243: an x-mcp-header value names the HTTP header Mcp-Param-<value> that
		// carries the argument: a non-empty token on a primitive property, unique
		// without regard to case.
		{"x-mcp-header is an HTTP token (no non-ASCII)", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"R\u00e9gion"}}}`), "invalid_schema"},
		{"x-mcp-header is an HTTP token (no control character)", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region\t1"}}}`), "invalid_schema"},
		{"x-mcp-header is a non-empty string", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`), "invalid_schema"},
		{"x-mcp-header is on a string, integer or boolean", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`), "invalid_schema"},
		{"x-mcp-header is unique without regard to case, at any depth", withField(t, good, "input_schema", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"object","properties":{"c":{"type":"integer","x-mcp-header":"REGION"}}}}}`), "invalid_schema"},
		{"a test is {args, expected, syscalls}: syscalls missing", withField(t, good, "tests", `[{"args":{},"expected":{}}]`), "invalid_test"},
		{"a test is {args, expected, syscalls}: no other keys", withField(t, good, "tests", `[{"args":{},"expected":{},"syscalls":[],"note":1}]`), "invalid_test"},
		{"args is an object", withField(t, good, "tests", `[{"args":[1],"expected":{},"syscalls":[]}]`), "invalid_test"},
		{"ordered mocks have name, optional exact args, and result/payload or ok:false,error", withField(t, good, "tests", `[{"args":{},"expected":{},"syscalls":[{"name":"clock.now"}]}]`), "invalid_test"},
		{"a tape entry has no unknown keys", withField(t, good, "tests", `[{"args":{},"expected":{},"syscalls":[{"name":"clock.now","result":{},"delay":1}]}]`), "invalid_test"},
		{"ok:false needs error", withField(t, good, "tests", `[{"args":{},"expected":{},"syscalls":[{"name":"clock.now","ok":false}]}]`), "invalid_test"},
		{"tests is an array", withField(t, good, "tests", `{}`), "schema_invalid"},
		{"proposal has no capability-request field: unknown top-level fields are rejected", withField(t, good, "capabilities", `["clock:now"]`), "schema_invalid"},
		{"every field is required", `{"name":"x"}`, "schema_invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := w.call(t, pid, tools.ProposeName, tc.args)
			if codeOf(err) != tc.code {
				t.Fatalf("got %v (%s), want %s", err, codeOf(err), tc.code)
			}
		})
	}
	cands, err := w.st.Candidates(pid)
	if err != nil || len(cands) != 0 {
		t.Fatalf("refused proposals persisted %d candidates (%v)", len(cands), err)
	}
}

// TestParseCandidateExact: the file form the CLI reads is decoded exactly, and
// CheckProposal makes the same checks as propose_jit_tool.
func TestParseCandidateExact(t *testing.T) {
	good := candidateJSON(t, "good_clock_now.json")
	for _, tc := range []struct {
		rule, in, code string
	}{
		{"unknown top-level fields are rejected (no capability request)", withField(t, good, "capabilities", `[]`), "invalid_request"},
		{"keys are case-sensitive", strings.Replace(good, `"name"`, `"Name"`, 1), "invalid_request"},
		{"duplicate keys are rejected", strings.Replace(good, `{"name":"clock_now",`, `{"name":"clock_now","name":"x",`, 1), "invalid_request"},
		{"a proposal is an object", `[]`, "invalid_request"},
		{"name is a string", withField(t, good, "name", `7`), "invalid_request"},
		{"missing fields are named", `{"name":"a","description":"b","source_code":"","input_schema":{},"output_schema":{}}`, "invalid_request"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := tools.ParseCandidate([]byte(tc.in))
			if codeOf(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	c, err := tools.ParseCandidate([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.CheckProposal(c, tools.Limits{}); err != nil {
		t.Fatalf("the JIT authoring Skill's example passes: %v", err)
	}
	c.Name = "run_jit_tool"
	if err := tools.CheckProposal(c, tools.Limits{}); !errors.Is(err, tools.ErrReservedName) {
		t.Fatalf("got %v", err)
	}
	c.Name, c.SourceCode = "ok", strings.Repeat(" ", 11)
	if err := tools.CheckProposal(c, tools.Limits{MaxSourceBytes: 10}); !errors.Is(err, tools.ErrLimitExceeded) {
		t.Fatalf("source size: got %v", err)
	}
}

// TestProposeDoesNotCompile: "It does not compile or run source." A proposal with a
// syntax error is accepted; the error surfaces at validation.
func TestProposeDoesNotCompile(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct)
	id := w.propose(t, pid, candidateJSON(t, "bad_syntax.json"))
	c, err := w.st.Candidate(pid, id)
	if err != nil || c.State != tools.StateProposed {
		t.Fatalf("candidate %+v %v", c, err)
	}
	evs := w.events(t, pid)
	if p := last(t, evs, tools.EventJITProposed); p["candidate_id"] != id || p["name"] != "bad_syntax" {
		t.Fatalf("a proposal is audited: %v", p)
	}
	rep := w.mustCall(t, pid, tools.ValidateName, idArg(id))
	if rep["ok"] != false {
		t.Fatalf("%v", rep)
	}
}

// TestNotFoundIsUniform: "Missing, foreign (another PID's) and unknown candidates all
// answer the same "not found" error."
func TestNotFoundIsUniform(t *testing.T) {
	w := newWorld(t)
	owner := w.spawn(t, engine.Direct)
	other := w.spawn(t, engine.Direct)
	foreign := w.propose(t, owner, candidateJSON(t, "good_clock_now.json"))
	missing := "tcand_" + strings.Repeat("0", 32)
	for _, tool := range []string{tools.ValidateName, tools.RegisterName} {
		var msgs []string
		for _, id := range []string{missing, foreign, "tcand_nope", "", "../" + foreign} {
			_, err := w.call(t, other, tool, idArg(id))
			if !errors.Is(err, tools.ErrNotFound) {
				t.Fatalf("%s %q: got %v, want not_found", tool, id, err)
			}
			msgs = append(msgs, strings.Replace(err.Error(), jsonString(id), "ID", 1))
		}
		for _, m := range msgs[1:] {
			if m != msgs[0] {
				t.Fatalf("%s: the answers differ, which is an oracle:\n%s\n%s", tool, msgs[0], m)
			}
		}
	}
	if c, err := w.st.Candidate(owner, foreign); err != nil || c.State != tools.StateProposed {
		t.Fatalf("another process's attempts changed the candidate: %+v %v", c, err)
	}
	if _, err := w.call(t, other, tools.ValidateName, `{"candidate_id":"x","extra":1}`); !errors.Is(err, engine.ErrSchemaInvalid) {
		t.Fatalf("validate takes exactly candidate_id: %v", err)
	}
}

// TestStateMachine: proposed → validated | rejected, validated → registered; every
// other transition is refused with its own code, audited, and changes nothing.
func TestStateMachine(t *testing.T) {
	w := newWorld(t)
	type step struct {
		tool, code string // code "" means success
		state      string // the state afterwards
	}
	cases := []struct {
		rule  string
		file  string
		steps []step
	}{
		{"proposed → validated → registered", "good_clock_now.json", []step{
			{tools.ValidateName, "", tools.StateValidated},
			{tools.RegisterName, "", tools.StateRegistered},
		}},
		{"validation is non-idempotent: a second validate is refused and not re-run", "good_clock_now.json", []step{
			{tools.ValidateName, "", tools.StateValidated},
			{tools.ValidateName, "already_settled", tools.StateValidated},
		}},
		{"proposed → rejected; do not revalidate unchanged rejection", "bad_wrong_expected.json", []step{
			{tools.ValidateName, "", tools.StateRejected},
			{tools.ValidateName, "already_settled", tools.StateRejected},
			{tools.RegisterName, "candidate_rejected", tools.StateRejected},
		}},
		{"registration auto-validates a non-validated candidate", "good_clock_now.json", []step{
			{tools.RegisterName, "", tools.StateRegistered},
			{tools.ValidateName, "already_settled", tools.StateRegistered},
		}},
		{"auto-validation that fails rejects the candidate and keeps its diagnostics", "bad_tape_leftover.json", []step{
			{tools.RegisterName, "validation_failed", tools.StateRejected},
			{tools.RegisterName, "candidate_rejected", tools.StateRejected},
		}},
		{"rejects already-registered candidates", "good_clock_now.json", []step{
			{tools.RegisterName, "", tools.StateRegistered},
			{tools.RegisterName, "already_registered", tools.StateRegistered},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			pid := w.spawn(t, engine.Direct, "clock:now")
			id := w.propose(t, pid, candidateJSON(t, tc.file))
			for i, s := range tc.steps {
				before := w.events(t, pid)
				_, err := w.call(t, pid, s.tool, idArg(id))
				if codeOf(err) != s.code && !(s.code == "" && err == nil) {
					t.Fatalf("step %d %s: got %v, want %q", i, s.tool, err, s.code)
				}
				c, err2 := w.st.Candidate(pid, id)
				if err2 != nil || c.State != s.state {
					t.Fatalf("step %d: state %q (%v), want %q", i, c.State, err2, s.state)
				}
				after := w.events(t, pid)
				if s.code != "" {
					// Refusals are audited: the call's tool_failed event carries the code.
					if f := last(t, after, engine.EventToolFailed); f["code"] != s.code || !strings.Contains(f["reason"].(string), id) {
						t.Fatalf("step %d: the refusal is not audited with its code and candidate: %v", i, f)
					}
					if s.code != "validation_failed" && count(after, tools.EventJITValidated) != count(before, tools.EventJITValidated) {
						t.Fatalf("step %d: a refused call validated again", i)
					}
				}
				if s.code == "already_settled" && !strings.Contains(err.Error(), "recorded result") {
					t.Fatalf("the refusal points at the recorded result: %v", err)
				}
			}
			c, _ := w.st.Candidate(pid, id)
			if len(c.Validations) != 1 {
				t.Fatalf("%d validation attempts recorded, want exactly 1", len(c.Validations))
			}
		})
	}
}

// TestRegisterCollisions: "Refuses … any collision with a process tool or an existing
// binding in the process — no replacement semantics."
func TestRegisterCollisions(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "clock:now")
	first := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	second := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	w.mustCall(t, pid, tools.RegisterName, idArg(first))
	before, _ := w.st.Binding(pid, "clock_now")
	_, err := w.call(t, pid, tools.RegisterName, idArg(second))
	if !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("got %v, want name_conflict", err)
	}
	after, _ := w.st.Binding(pid, "clock_now")
	if after != before {
		t.Fatalf("the binding was replaced: %+v → %+v", before, after)
	}
	if c, _ := w.st.Candidate(pid, second); c.State != tools.StateProposed || len(c.Validations) != 0 {
		t.Fatalf("a registration refused for a collision does not validate first: %s, %d attempts", c.State, len(c.Validations))
	}
	w.mustCall(t, pid, tools.ValidateName, idArg(second))
	if _, err := w.call(t, pid, tools.RegisterName, idArg(second)); !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("validated, then registered under a bound name: %v", err)
	}
	if c, _ := w.st.Candidate(pid, second); c.State != tools.StateValidated {
		t.Fatalf("the refused candidate is %s, want still validated", c.State)
	}
	// Once registered, the name is a process tool: a new proposal is refused at once.
	if _, err := w.call(t, pid, tools.ProposeName, candidateJSON(t, "good_clock_now.json")); !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("propose after registration: %v", err)
	}
	// Another process is unaffected: bindings are per process.
	other := w.spawn(t, engine.Direct)
	w.mustCall(t, other, tools.RegisterName, idArg(w.propose(t, other, candidateJSON(t, "good_clock_now.json"))))
}

// TestValidationReportRecorded: validate returns exactly what it persists, and the
// candidate's evidence is specific.
func TestValidationReportRecorded(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct)
	id := w.propose(t, pid, candidateJSON(t, "bad_wrong_expected.json"))
	out, err := w.call(t, pid, tools.ValidateName, idArg(id))
	if err != nil {
		t.Fatal(err)
	}
	var rep tools.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	c, _ := w.st.Candidate(pid, id)
	rec, err := tools.ReportOf(c.Validations[0])
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(rec)
	if string(a) != string(b) {
		t.Fatalf("returned and recorded reports differ:\n%s\n%s", a, b)
	}
	if rep.OK || len(rep.Errors) == 0 || rep.Errors[0].Code != tools.CodeExpectedMismatch || rep.Errors[0].Path != "$.n" || rep.Tests[1].Observed == nil || *rep.Errors[0].Test != 1 {
		t.Fatalf("a wrong expected value names the test, the JSON path and what was observed: %s", a)
	}
	ev := last(t, w.events(t, pid), tools.EventJITValidated)
	if ev["candidate_id"] != id || ev["ok"] != false || ev["state"] != "rejected" {
		t.Fatalf("jit_validated %v", ev)
	}
}

// TestPersistenceAcrossReopen: candidates, validation records and bindings survive a
// reopen, and "committed bindings can rehydrate" — through the kernel's JIT loader
// (engine.Config.JIT), the one wiring: the installation is recorded once, by the
// kernel (tools_changed, change "rehydrated"), and never as jit_rehydrated, which only
// earlier versions wrote.
func TestPersistenceAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir, tools.Config{})
	pid, toolID := w.registered(t, engine.Direct, "clock:now")
	rejected := w.propose(t, pid, candidateJSON(t, "bad_wrong_expected.json"))
	w.mustCall(t, pid, tools.ValidateName, idArg(rejected))
	pending := w.propose(t, pid, candidateJSON(t, "good_sum_exact.json"))
	w.close()

	w2 := openWorld(t, dir, tools.Config{})
	if fs := w2.k.BindingFailures(); len(fs) != 0 {
		t.Fatalf("binding failures: %+v", fs)
	}
	b, err := w2.st.Binding(pid, "clock_now")
	if err != nil || b.ToolID != toolID || b.Scope != tools.ScopeEphemeralProcess {
		t.Fatalf("binding after reopen: %+v %v", b, err)
	}
	c, err := w2.st.Candidate(pid, b.CandidateID)
	if err != nil || c.State != tools.StateRegistered || len(c.Validations) != 1 || !c.Validations[0].OK {
		t.Fatalf("registered candidate after reopen: %+v %v", c, err)
	}
	if r, _ := w2.st.Candidate(pid, rejected); r.State != tools.StateRejected || len(r.Validations) != 1 || r.Validations[0].OK {
		t.Fatalf("rejected candidate after reopen: %+v", r)
	}
	if p, _ := w2.st.Candidate(pid, pending); p.State != tools.StateProposed {
		t.Fatalf("proposed candidate after reopen: %+v", p)
	}
	info, err := w2.k.Process(pid)
	if err != nil || info.Tools["clock_now"] != engine.KindJIT {
		t.Fatalf("the binding was not reinstalled: %+v %v", info, err)
	}
	out := w2.mustCall(t, pid, "clock_now", `{"timezone":"Europe/Paris"}`)
	if out["timezone"] != "Europe/Paris" {
		t.Fatalf("%v", out)
	}
	evs := w2.events(t, pid)
	if last(t, evs, engine.EventToolCalled)["tool_id"] != toolID {
		t.Fatal("the rehydrated tool keeps its identity")
	}
	if count(evs, tools.EventJITRehydrated) != 0 {
		t.Fatal("jit_rehydrated is no longer written")
	}
	rehydrated := 0
	for _, ev := range evs {
		var d map[string]any
		if ev.Type == engine.EventToolsChanged && json.Unmarshal(ev.Data, &d) == nil && d["change"] == "rehydrated" && d["tool_id"] == toolID {
			rehydrated++
		}
	}
	if rehydrated != 1 {
		t.Fatalf("%d tools_changed rehydrated events for the binding, want 1", rehydrated)
	}
	// The settled candidate is still settled; the pending one validates now.
	if _, err := w2.call(t, pid, tools.ValidateName, idArg(rejected)); !errors.Is(err, tools.ErrAlreadySettled) {
		t.Fatalf("%v", err)
	}
	if rep := w2.mustCall(t, pid, tools.ValidateName, idArg(pending)); rep["ok"] != true {
		t.Fatalf("%v", rep)
	}
}

// TestOldRehydratedEventsStillRead: logs written by earlier versions hold
// jit_rehydrated events (a second wiring wrote them); "old logs containing it must
// still read and verify". Such a log reopens, verifies, exports and keeps its tool.
func TestOldRehydratedEventsStillRead(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir, tools.Config{})
	pid, toolID := w.registered(t, engine.Direct, "clock:now")
	old, _ := json.Marshal(map[string]any{"candidate_id": "tcand_0", "tool_id": toolID, "name": "clock_now", "scope": tools.ScopeEphemeralProcess})
	if _, err := w.st.Append(context.Background(), pid, tools.EventJITRehydrated, old); err != nil {
		t.Fatal(err)
	}
	w.close()
	w2 := openWorld(t, dir, tools.Config{})
	if err := w2.k.VerifyLog(pid); err != nil {
		t.Fatalf("a log holding jit_rehydrated does not verify: %v", err)
	}
	evs := w2.events(t, pid)
	if r := last(t, evs, tools.EventJITRehydrated); r["tool_id"] != toolID {
		t.Fatalf("the old event does not read back: %v", r)
	}
	if count(evs, tools.EventJITRehydrated) != 1 {
		t.Fatal("reopening wrote jit_rehydrated again")
	}
	if out := w2.mustCall(t, pid, "clock_now", `{"timezone":"UTC"}`); out["timezone"] != "UTC" {
		t.Fatalf("%v", out)
	}
}

// TestForkNewIdentities: "ephemeral_process is ownership scope: committed bindings can
// rehydrate, while checkpoint forks get new identities." The kernel re-creates the
// binding in the fork through LoadJIT: same name and program, new tool ID.
func TestForkNewIdentities(t *testing.T) {
	w := newWorld(t)
	pid, toolID := w.registered(t, engine.Direct, "clock:now")
	ck, err := w.k.Checkpoint(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	child, err := w.k.Fork(context.Background(), ck)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.st.Binding(child, "clock_now")
	if err != nil || b.ToolID == toolID || !toolRE.MatchString(b.ToolID) || b.CandidatePID != pid {
		t.Fatalf("fork binding %+v %v (parent tool %s)", b, err, toolID)
	}
	out := w.mustCall(t, child, "clock_now", `{"timezone":"UTC"}`)
	if out["timezone"] != "UTC" {
		t.Fatalf("%v", out)
	}
	if last(t, w.events(t, child), engine.EventToolCalled)["tool_id"] != b.ToolID {
		t.Fatal("the fork's calls carry the fork's tool ID")
	}
	// The candidate stays its proposer's: the fork cannot validate or register it.
	if _, err := w.call(t, child, tools.RegisterName, idArg(b.CandidateID)); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("%v", err)
	}
}

// TestNoKernelOfItsOwn: the lifecycle keeps no kernel; a call hands its handler the
// kernel running it. A handler invoked outside any kernel (an engine.Call an embedder
// built by hand) is refused with a typed error and changes nothing, and NewJIT checks
// its configuration.
func TestNoKernelOfItsOwn(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct)
	id := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	var register engine.Tool
	for _, tl := range w.jit.Tools() {
		if tl.Name == tools.RegisterName {
			register = tl
		}
	}
	bare := &engine.Call{PID: pid, Tool: tools.RegisterName, Args: json.RawMessage(idArg(id))}
	if _, err := register.Handler(context.Background(), bare); codeOf(err) != "invalid_state" {
		t.Fatalf("register outside a kernel: %v", err)
	}
	if bs, _ := w.st.Bindings(pid); len(bs) != 0 {
		t.Fatalf("a refused registration left bindings %+v", bs)
	}
	if c, _ := w.st.Candidate(pid, id); c.State != tools.StateProposed || len(c.Validations) != 0 {
		t.Fatalf("a refused registration changed the candidate: %+v", c)
	}
	if _, err := tools.NewJIT(tools.Config{}); !errors.Is(err, tools.ErrInvalidRequest) {
		t.Fatalf("NewJIT without store: %v", err)
	}
}

// TestConcurrentSettlement: concurrent validations or registrations of one candidate
// settle it once; the others are refused.
func TestConcurrentSettlement(t *testing.T) {
	w := newWorld(t)
	for _, tool := range []string{tools.ValidateName, tools.RegisterName} {
		pid := w.spawn(t, engine.Direct)
		id := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
		const n = 4
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() {
				_, err := w.call(t, pid, tool, idArg(id))
				errs <- err
			}()
		}
		ok := 0
		for i := 0; i < n; i++ {
			err := <-errs
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, tools.ErrAlreadySettled) && !errors.Is(err, tools.ErrAlreadyRegistered) && !errors.Is(err, tools.ErrNameConflict):
				t.Fatalf("%s: unexpected refusal %v", tool, err)
			}
		}
		c, _ := w.st.Candidate(pid, id)
		if ok != 1 || len(c.Validations) != 1 {
			t.Fatalf("%s: %d successes and %d recorded validations, want 1 and 1", tool, ok, len(c.Validations))
		}
		if bs, _ := w.st.Bindings(pid); tool == tools.RegisterName && len(bs) != 1 {
			t.Fatalf("%d bindings", len(bs))
		}
	}
}

// TestLoadJIT: the kernel's rehydrate/fork hook rebuilds exactly the registered tool
// from the store, for the owner's binding and for a binding re-created in another
// process (CandidatePID), and refuses a binding whose candidate is not registered.
func TestLoadJIT(t *testing.T) {
	w := newWorld(t)
	pid, toolID := w.registered(t, engine.Direct, "clock:now")
	b, err := w.st.Binding(pid, "clock_now")
	if err != nil {
		t.Fatal(err)
	}
	tool, err := w.jit.LoadJIT(context.Background(), b)
	if err != nil || tool.Name != "clock_now" || tool.ID != toolID || tool.Kind != engine.KindJIT || tool.Handler == nil ||
		!strings.Contains(string(tool.InputSchema), "timezone") || tool.Annotations.Idempotent {
		t.Fatalf("%+v %v", tool, err)
	}
	fork := store.Binding{PID: "pid_fork", Name: b.Name, ToolID: "tool_" + strings.Repeat("1", 32), CandidateID: b.CandidateID, CandidatePID: pid, Scope: b.Scope}
	if tool, err := w.jit.LoadJIT(context.Background(), fork); err != nil || tool.ID != fork.ToolID {
		t.Fatalf("fork binding: %+v %v", tool, err)
	}
	pending := w.propose(t, pid, withField(t, candidateJSON(t, "good_clock_now.json"), "name", `"other"`))
	bad := store.Binding{PID: pid, Name: "other", ToolID: "tool_" + strings.Repeat("2", 32), CandidateID: pending, Scope: b.Scope}
	if _, err := w.jit.LoadJIT(context.Background(), bad); err == nil {
		t.Fatal("a binding to a candidate that is not registered must not load")
	}
}

// TestRegisterCaseFoldCollision: registration refuses "a name equal to a process tool's name
// or another JIT tool's under Unicode case folding", also when the candidate was proposed
// before the other tool was registered.
func TestRegisterCaseFoldCollision(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "clock:now")
	upper := w.propose(t, pid, withField(t, candidateJSON(t, "good_clock_now.json"), "name", `"Clock_Now"`))
	lower := w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))
	w.mustCall(t, pid, tools.RegisterName, idArg(lower))
	if _, err := w.call(t, pid, tools.RegisterName, idArg(upper)); !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("registering Clock_Now beside clock_now: got %v, want name_conflict", err)
	}
	if _, err := w.call(t, pid, tools.ProposeName, withField(t, candidateJSON(t, "good_clock_now.json"), "name", `"CLOCK_NOW"`)); !errors.Is(err, tools.ErrNameConflict) {
		t.Fatalf("proposing CLOCK_NOW beside clock_now: got %v, want name_conflict", err)
	}
	if _, err := w.st.Binding(pid, "Clock_Now"); err == nil {
		t.Fatal("Clock_Now was bound")
	}
}

// "JIT names ... are hidden from the model" in a multiplexed process: a proposal or a
// registration whose name case-folds to a JIT tool's is refused as in direct mode, but
// the refusal does not spell out the hidden tool's name. A direct process names it.
func TestCaseFoldCollisionKeepsAMultiplexedNameHidden(t *testing.T) {
	w := newWorld(t)
	for _, proj := range []engine.Projection{engine.Multiplexed, engine.Direct} {
		pid := w.spawn(t, proj, "clock:now")
		upper := w.propose(t, pid, withField(t, candidateJSON(t, "good_clock_now.json"), "name", `"Clock_Now"`))
		w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, candidateJSON(t, "good_clock_now.json"))))
		_, regErr := w.call(t, pid, tools.RegisterName, idArg(upper))
		_, propErr := w.call(t, pid, tools.ProposeName, withField(t, candidateJSON(t, "good_clock_now.json"), "name", `"CLOCK_NOW"`))
		for what, err := range map[string]error{"register Clock_Now": regErr, "propose CLOCK_NOW": propErr} {
			if !errors.Is(err, tools.ErrNameConflict) {
				t.Fatalf("%s: %s beside clock_now: got %v, want name_conflict", proj, what, err)
			}
			if named := strings.Contains(err.Error(), `"clock_now"`); named != (proj == engine.Direct) {
				t.Errorf("%s: %s: the refusal %q names the tool clock_now: %v", proj, what, err, named)
			}
		}
	}
}
