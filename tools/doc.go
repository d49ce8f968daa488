// Package tools holds the built-in tools of a process, each a schema and a handler:
// echo, propose_jit_tool, validate_jit_tool, register_jit_tool and the Skill tools;
// and the call path of the JIT tools a process registers.
//
// Its handlers are called by the engine's pipeline and must not bypass it: they never
// write tool_called, tool_result or tool_failed events or ToolResults (the engine
// does), never dispatch a model call, and reach the sandbox only through package wasm
// and the world only through package syscalls. Each constructor returns engine.Tool
// values that an embedder passes to engine.Open in Config.Builtins; a process enables
// them by name at Spawn.
//
// # Wiring
//
//	sb, _ := wasm.NewEngine(ctx, wasm.Config{})
//	st, _ := store.Open(dir, store.Options{})
//	jit, _ := tools.NewJIT(tools.Config{Store: st, Sandbox: sb})
//	k, _ := engine.Open(ctx, st, engine.Config{
//		Builtins: append([]engine.Tool{tools.Echo()}, jit.Tools()...),
//		JIT:      jit, // the one wiring: Open restores committed bindings, Fork re-creates them (LoadJIT)
//	})
//	pid, _ := k.Spawn(ctx, engine.ProcessConfig{Capabilities: []string{"clock:now"},
//		Tools: []string{tools.ProposeName, tools.ValidateName, tools.RegisterName}})
//
// `libos validate` uses the lifecycle's checks without a store or kernel:
//
//	c, err := tools.ParseCandidate(fileBytes)            // exact JSON, exactly six fields
//	err = tools.CheckProposal(c, tools.Limits{})          // propose_jit_tool's checks
//	r := tools.NewValidator(sb, tools.ValidatorConfig{Clock: fixed}).Validate(ctx, c)
//
// and Precheck(c, lim) while the sandbox starts: it does Validate's sandbox-free part
// (the proposal checks, the compile of the source) into the memos Validate reads.
//
// # The JIT lifecycle
//
// propose_jit_tool checks a Candidate (CheckProposal: name, sizes, schemas compiled as
// JSON Schema 2020-12 with no $ref loaded from anywhere, test and tape shapes; not the
// source) and that the name is not a tool or binding of the process, then stores a
// candidate owned by the calling PID in state proposed, with a jit_proposed event in
// the same batch, and returns {candidate_id} (tcand_ + 128 random bits).
//
// validate_jit_tool {candidate_id} runs Validator.Validate (jsbundle's static checks,
// the schema portability lint and args/expected-vs-schema findings as warnings, then
// every test in a fresh JavaScript context under its syscall tape, with no ambient
// clock and ValidationSeed; up to ValidatorConfig.Parallel tests at once, each
// on its own sandbox instance, reported in test order) and stores the Report as a
// validation attempt, the state change (validated or rejected) and a jit_validated
// event in one batch. A settled candidate is refused (already_settled), never
// validated again.
//
// register_jit_tool {candidate_id} validates a proposed candidate first, refuses
// rejected, registered and colliding ones, compiles the program once, and installs the
// tool with engine.Call.InstallTool (the kernel running the call; the lifecycle keeps
// no kernel of its own), whose batch carries the state change, the
// Binding (scope ephemeral_process, tool_ + 128 random bits) and a jit_registered
// event. It returns {tool_id, name, scope}.
//
// The operator's JIT.Discard moves a candidate that was never registered to state
// discarded (a jit_discarded event by the operator in the same batch); validation and
// registration refuse it from then on with candidate_discarded.
//
// Missing, malformed and other processes' candidates all get the same not_found.
// Every refusal is a typed *Error whose code the engine records in the call's
// tool_failed event.
//
// A JIT tool call reaches its handler only after the engine has checked the arguments
// against the stored input schema. The handler runs the cached program in the sandbox
// with the calling process's authority (syscalls.Router.For(call.Syscalls): the live
// capability set, the kernel as approver, the image's route policy and budgets, the
// call's depth) and the image's sandbox bounds (call.Sandbox); every syscall decision
// is audited by the router. The engine then checks the result against the output
// schema; a failure there does not undo syscalls that ran. A program that lets a
// refused syscall escape fails with the syscall's code (capability_denied, …) and the
// router's message for it (syscalls.Bound.Refusal); other sandbox failures keep wasm's
// code.
//
// # The path of one tool call
//
// A JIT tool's handler is step 3 of 6 (package libos lists the steps): the kernel calls
// it with a Call that carries its arguments and its syscall authority as values; it
// binds the router to that authority, hands the bound router to the sandbox as its
// Syscaller, and calls nothing of the kernel on the way. The guest's syscalls go from
// the sandbox straight to the router, never back through this package.
//
// # Data
//
// In: engine.Call arguments (exact JSON), candidates and bindings from package store.
// Out: candidates, validation attempts, bindings and jit_* events to package store;
// JIT tools to the kernel's process tool table; results to the engine's pipeline.
package tools
