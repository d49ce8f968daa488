package tools_test

import (
	"context"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// parsesOf returns how many JSON documents one model call of tool with args costs,
// counted by jsonexact.Decodes (the one exact-JSON decoder every layer uses).
func parsesOf(t *testing.T, w *world, pid, tool, args string) uint64 {
	t.Helper()
	w.call(t, pid, tool, args) // warm: compiled programs, caches
	before := jsonexact.Decodes()
	w.call(t, pid, tool, args)
	return jsonexact.Decodes() - before
}

// "Parse a call's arguments once (in the adapter) and hand the parsed value down":
// the documents one call parses, end to end. Each is named; a layer that parses the
// arguments again adds one and fails this test.
//
//	echo:               the frame (adapter)                                       = 1
//	JIT tool + kv.put:  the frame · the syscall's arguments, once where they leave
//	                    the sandbox · its result · the guest's result (sandbox)   = 4
//	JIT tool + tools.call echo: the frame · the syscall's arguments, once where they
//	                    leave the sandbox (echo's arguments are handed down in them) ·
//	                    its result · the guest's result                           = 4
//	validate (refused): the frame                                                 = 1
//
// The guest's result is parsed once, exactly, where it leaves the sandbox
// (wasm.Result.Doc), and handed to settle with Call.Return. The syscall's result is
// the provider's, checked against the route's result schema. Nothing the kernel
// built from a parsed value is parsed again: its events
// (tool_called, tool_result, tool_failed) and the router's syscall audit events reach
// the store as jsonexact.Doc, which the
// store checks without parsing, and echo hands its result back with Call.Return.
//
// Before the arguments were handed down these were 4, 9 and 4: the router decoded a
// syscall's arguments for the audit record, for the route, and again for the journal,
// and validate_jit_tool decoded its arguments again in the handler; then 4, 7 and 3,
// while the store parsed every event the kernel wrote, and 2 while settle parsed
// echo's result; a nested tools.call cost 6 while the kernel parsed the nested
// arguments again. The sandbox's host once checked a syscall's arguments with
// json.Valid (uncounted) before the router decoded them; now its one exact decoding
// is counted here and handed to the router (wasm.ExactSyscaller), which parses
// nothing. The syscall's audit event was 1 more while the router wrote it with
// json.Marshal and the store parsed it back.
func TestParsesPerCall(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "kv:write", "tools:call")
	const putOnce = `export async function run(args: { n: number }, libos: any) {
  await libos.syscall("kv.put", { key: "k", value: args.n });
  return { n: args.n };
}`
	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "put_once", putOnce, `{"type":"object"}`))))
	const callsEcho = `export async function run(args: { n: number }, libos: any) {
  return await libos.syscall("tools.call", { tool: "echo", arguments: { n: args.n } });
}`
	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "calls_echo", callsEcho, `{"type":"object"}`))))
	for _, c := range []struct {
		what, tool, args string
		max              uint64
	}{
		{"echo", tools.EchoName, `{"n":1,"s":"x"}`, 1},
		{"a JIT tool with one kv.put", "put_once", `{"n":1}`, 4},
		{"a JIT tool that calls echo with tools.call", "calls_echo", `{"n":1}`, 4},
		{"validate_jit_tool of an unknown candidate", tools.ValidateName, idArg("tcand_00000000000000000000000000000000"), 1},
	} {
		n := parsesOf(t, w, pid, c.tool, c.args)
		t.Logf("%s: %d parses", c.what, n)
		if n > c.max {
			t.Errorf("%s parses %d documents, more than the %d it needs: a layer parses the arguments again", c.what, n, c.max)
		}
	}
}

// The sandbox hands its exact decoding of a syscall's arguments to the router and to a
// validation tape alike, so neither parses them again.
var (
	_ wasm.ExactSyscaller = (*syscalls.Bound)(nil)
	_ wasm.ExactSyscaller = (*syscalls.Tape)(nil)
)

// "Parse ... once and hand the parsed value down", for validation: a test's arguments
// are decoded once, with the test, and reach the sandbox decoded (wasm.Engine.RunDoc),
// and the guest's result is compared as the sandbox decoded it (wasm.Result.Doc).
// What one more test of the clock candidate costs, each document named:
//
//	the test itself (its args, expected and tape come from that one decoding) ·
//	clock.now's arguments, once where they leave the sandbox · the guest's result,
//	once where it leaves the sandbox                                             = 3
//
// It was 5 while the sandbox parsed the test's arguments again from their text and the
// validator parsed the result again to compare it.
func TestParsesPerValidationTest(t *testing.T) {
	v := tools.NewValidator(sandbox(t), tools.ValidatorConfig{})
	parses := func(n int) uint64 {
		t.Helper()
		c := clockWithTests(t, n)
		if r := v.Validate(context.Background(), c); !r.OK || len(r.Tests) != n { // warm
			t.Fatalf("%d tests: %+v", n, r)
		}
		before := jsonexact.Decodes()
		v.Validate(context.Background(), c)
		return jsonexact.Decodes() - before
	}
	one, ten := parses(1), parses(10)
	t.Logf("1 test: %d parses, 10 tests: %d", one, ten)
	if ten < one || (ten-one)%9 != 0 || (ten-one)/9 != 3 {
		t.Errorf("one more test costs %d/9 parsed documents, want 3: a layer parses a test's arguments again", ten-one)
	}
}
