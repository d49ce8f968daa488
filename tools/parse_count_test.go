package tools_test

import (
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/tools"
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
// the parses one call costs, end to end (the frame, the arguments, each syscall's
// arguments and result, the tool's result and what the store parses of its events).
func TestParsesPerCall(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct, "kv:write")
	const putOnce = `export async function run(args: { n: number }, libos: any) {
  await libos.syscall("kv.put", { key: "k", value: args.n });
  return { n: args.n };
}`
	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, openCandidate(t, "put_once", putOnce, `{"type":"object"}`))))
	echo := parsesOf(t, w, pid, tools.EchoName, `{"n":1,"s":"x"}`)
	jit := parsesOf(t, w, pid, "put_once", `{"n":1}`)
	validate := parsesOf(t, w, pid, tools.ValidateName, idArg("tcand_00000000000000000000000000000000"))
	t.Logf("parses per call: echo %d, a JIT tool with one kv.put %d, validate_jit_tool (refused) %d", echo, jit, validate)
}
