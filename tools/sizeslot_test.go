package tools_test

import (
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/syscalls"
)

// The size slot end to end: "each route declares a typed policy slot that images
// fill". An image's limits.syscall_sizes bounds a route's arguments and result; a JIT
// tool's syscall over the bound is refused with limit_exceeded (the program sees the
// code and can catch it), audited at stage args_size or result_size like every
// capability decision, and a call within the bound passes.
func TestImageSizeSlotBoundsSyscalls(t *testing.T) {
	w := newWorld(t)
	manifest := "format: libos.image/v1\nname: sized\nversion: 1.0.0\n" +
		"tools: [echo, propose_jit_tool, validate_jit_tool, register_jit_tool]\n" +
		"capabilities: [kv:read, kv:write]\n" +
		"limits:\n  syscall_sizes:\n    kv.put: {max_args_bytes: 64}\n    kv: {max_result_bytes: 48}\n"
	img, err := image.ParseImage([]byte(manifest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Limits.SyscallSizes["kv.put"]; b.MaxArgsBytes != 64 {
		t.Fatalf("the manifest's size slot: %+v", img.Limits.SyscallSizes)
	}
	pid := w.spawnWithTool(t, img, "sized", `export async function run(args: any, libos: any) {
  const out: any = {};
  try { await libos.syscall("kv.put", { key: "big", value: "x".repeat(100) }); out.big = "stored"; } catch (e: any) { out.big = e.code; }
  await libos.syscall("kv.put", { key: "small", value: "x".repeat(30) });
  try { await libos.syscall("kv.get", { key: "small" }); out.get = "read"; } catch (e: any) { out.get = e.code; }
  try { await libos.syscall("kv.get", { key: "none" }); out.none = "read"; } catch (e: any) { out.none = e.code; }
  return out;
}`)
	got := w.mustCall(t, pid, "sized", `{}`)
	if got["big"] != "limit_exceeded" || got["get"] != "limit_exceeded" || got["none"] != "read" {
		t.Fatalf("the program saw %v: arguments over 64 bytes and a result over 48 are refused, a small result passes", got)
	}
	evs := w.events(t, pid)
	puts, gets := syscallEvents(t, evs, "kv.put"), syscallEvents(t, evs, "kv.get")
	if len(puts) != 2 || len(gets) != 2 {
		t.Fatalf("every syscall is audited: %d kv.put, %d kv.get", len(puts), len(gets))
	}
	for _, c := range []struct {
		ev    map[string]any
		stage string
	}{{puts[0], "args_size"}, {gets[0], "result_size"}} {
		if c.ev["decision"] != "denied" || c.ev["stage"] != c.stage || c.ev["code"] != string(syscalls.CodeLimitExceeded) ||
			!strings.Contains(c.ev["reason"].(string), "limits.syscall_sizes") {
			t.Errorf("audit %v, want denied at %s with limit_exceeded naming the slot", c.ev, c.stage)
		}
	}
	if puts[1]["decision"] != "allowed" || gets[1]["decision"] != "allowed" {
		t.Errorf("calls within the bound are allowed: %v %v", puts[1], gets[1])
	}
}
