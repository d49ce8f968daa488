package tools_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

const (
	seedSource = `export async function run(args: any, libos: any) {
  await libos.syscall("kv.put", { key: "hr/salary", value: { alice: 100 } });
  return {};
}`
	// leakSource reads a kv key (when given) and then fetches.
	leakSource = `export async function run(args: any, libos: any) {
  if (args.key) await libos.syscall("kv.get", { key: args.key });
  const res = await libos.syscall("net.fetch", { url: args.url });
  return { status: res.status };
}`
	copySource = `export async function run(args: any, libos: any) {
  const v = await libos.syscall("kv.get", { key: "hr/salary" });
  await libos.syscall("kv.put", { key: args.to, value: v.value });
  return {};
}`
	// viaToolSource reads confidential data and hands the fetch to another tool.
	viaToolSource = `export async function run(args: any, libos: any) {
  await libos.syscall("kv.get", { key: "hr/salary" });
  return await libos.syscall("tools.call", { tool: "leak", arguments: { url: args.url } });
}`
	// catcherSource reads, tries to send, catches the refusal and reports success.
	catcherSource = `export async function run(args: any, libos: any) {
  const v = await libos.syscall("kv.get", { key: "hr/salary" });
  try { await libos.syscall("net.fetch", { url: args.url }); } catch (e) { return { caught: String(e.code), value: v.value }; }
  return { caught: null, value: v.value };
}`
)

// TestDataFlowPerCallTaint: "once a call has received a labelled value, everything it
// sends afterwards carries that label. Sinks: net.fetch (per host), kv.put into a
// namespace with a lower label, tools.call into a tool the image marks as external,
// and the tool's result going back to the model … A refused flow is a typed
// data_flow_denied naming the label and the sink, audited, catchable by the guest";
// "labels survive a kv write and a restart; a JIT tool calling another tool through
// tools.call carries its labels into it."
func TestDataFlowPerCallTaint(t *testing.T) {
	top := t
	sink := newServer(t, func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") })
	policy := func(rules string) string {
		return fmt.Sprintf(`net:
  allow: ["%s"]
  allow_addresses: ["127.0.0.1"]
labels:
  kv: {"hr/*": confidential}
data_flow:
%s`, sink.hostport(), rules)
	}
	url := fmt.Sprintf(`{"url":%q}`, sink.URL+"/")
	dir := t.TempDir()
	w := openWorld(t, dir, tools.Config{})
	pid := w.spawnWithTool(t, fetchImage(t, policy("  - {label: confidential, deny: [net.fetch]}\n")), "seed", seedSource)
	for name, src := range map[string]string{"leak": leakSource, "copy": copySource, "via_tool": viaToolSource, "catcher": catcherSource} {
		w.register(t, pid, name, src)
	}
	w.mustCall(t, pid, "seed", `{}`)

	denied := func(t *testing.T, w *world, pid, tool, args, label, sinkName string) {
		t.Helper()
		n := len(w.events(t, pid))
		before := sink.hits.Load()
		_, err := w.call(t, pid, tool, args)
		if codeOf(err) != syscalls.CodeDataFlowDenied {
			t.Fatalf("%s: code %q, want %s (err %v)", tool, codeOf(err), syscalls.CodeDataFlowDenied, err)
		}
		if !strings.Contains(err.Error(), label) || !strings.Contains(err.Error(), sinkName) {
			t.Fatalf("the refusal names the label and the sink: %v", err)
		}
		if sink.hits.Load() != before {
			t.Fatalf("the sink received the refused data")
		}
		found := false
		for _, e := range w.events(t, pid)[n:] {
			d := data(t, e)
			if (e.Type == syscalls.EventSyscall || e.Type == syscalls.EventDataFlow) && d["code"] == syscalls.CodeDataFlowDenied && d["decision"] == "denied" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no denied audit event with code %s", syscalls.CodeDataFlowDenied)
		}
	}

	t.Run("a tool that reads a confidential key and then fetches is refused at the fetch", func(t *testing.T) {
		denied(t, w, pid, "leak", `{"key":"hr/salary","url":`+jsonString(sink.URL+"/")+`}`, "confidential", "net.fetch")
	})
	t.Run("the same tool without the read succeeds", func(t *testing.T) {
		if _, err := w.call(t, pid, "leak", url); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a JIT tool calling another through tools.call carries its labels into it", func(t *testing.T) {
		denied(t, w, pid, "via_tool", url, "confidential", "net.fetch")
	})
	t.Run("the refusal is catchable by the guest, and nothing was sent", func(t *testing.T) {
		out := w.mustCall(t, pid, "catcher", url)
		if out["caught"] != syscalls.CodeDataFlowDenied {
			t.Fatalf("the guest caught %v, want %s", out["caught"], syscalls.CodeDataFlowDenied)
		}
	})
	t.Run("labels survive a kv write and a restart", func(t *testing.T) {
		w.mustCall(t, pid, "copy", `{"to":"public/copy"}`)
		w.close()
		w2 := openWorld(top, dir, tools.Config{}) // open for the rest of the test
		denied(t, w2, pid, "leak", `{"key":"public/copy","url":`+jsonString(sink.URL+"/")+`}`, "confidential", "net.fetch")
		var st *store.Store = w2.st
		if l, err := st.KVLabels(pid, "public/copy"); err != nil || len(l) != 1 || l[0] != "confidential" {
			t.Fatalf("stored labels of public/copy: %v %v", l, err)
		}
		if _, err := w2.call(t, pid, "leak", url); err != nil {
			t.Fatalf("a call that read nothing labelled still fetches after the restart: %v", err)
		}
		w = w2
	})

	// The other sinks, with rules that forbid them.
	t.Run("kv.put into a key without the label is refused; into one with it, allowed", func(t *testing.T) {
		pid := w.spawnWithTool(t, fetchImage(t, policy("  - {label: confidential, deny: [kv.put]}\n")), "seed", seedSource)
		w.register(t, pid, "copy", copySource)
		w.mustCall(t, pid, "seed", `{}`)
		denied(t, w, pid, "copy", `{"to":"public/copy"}`, "confidential", "kv.put")
		w.mustCall(t, pid, "copy", `{"to":"hr/copy"}`)
	})
	t.Run("the result going back to the model is a sink, and a caught refusal does not make it success", func(t *testing.T) {
		pid := w.spawnWithTool(t, fetchImage(t, policy("  - {label: confidential, deny: [net.fetch, model]}\n")), "seed", seedSource)
		w.register(t, pid, "catcher", catcherSource)
		w.mustCall(t, pid, "seed", `{}`)
		denied(t, w, pid, "catcher", url, "confidential", "model")
	})
	t.Run("tools.call into an external tool is a sink", func(t *testing.T) {
		img := fetchImage(t, policy("  - {label: confidential, deny: [tools.call]}\n")+"external_tools: [echo]\n")
		pid := w.spawnWithTool(t, img, "seed", seedSource)
		const toEcho = `export async function run(args: any, libos: any) {
  const v = await libos.syscall("kv.get", { key: "hr/salary" });
  return await libos.syscall("tools.call", { tool: "echo", arguments: { v: v.value } });
}`
		w.register(t, pid, "to_echo", toEcho)
		w.mustCall(t, pid, "seed", `{}`)
		denied(t, w, pid, "to_echo", `{}`, "confidential", "tools.call")
	})
	t.Run("a labelled host's data may be fetched out only to the hosts its rule allows", func(t *testing.T) {
		internal := newServer(t, func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "internal data") })
		img := fetchImage(t, fmt.Sprintf(`net:
  allow: ["%[1]s", "%[2]s"]
  allow_addresses: ["127.0.0.1"]
labels:
  net: {"%[1]s": internal}
data_flow:
  - {label: internal, allow_hosts: ["%[1]s"]}
`, internal.hostport(), sink.hostport()))
		const relay = `export async function run(args: any, libos: any) {
  const a = await libos.syscall("net.fetch", { url: args.from });
  const b = await libos.syscall("net.fetch", { url: args.to });
  return { a: a.status, b: b.status };
}`
		pid := w.spawnWithTool(t, img, "relay", relay)
		denied(t, w, pid, "relay", fmt.Sprintf(`{"from":%q,"to":%q}`, internal.URL+"/", sink.URL+"/"), "internal", "net.fetch")
		if _, err := w.call(t, pid, "relay", fmt.Sprintf(`{"from":%q,"to":%q}`, internal.URL+"/", internal.URL+"/again")); err != nil {
			t.Fatalf("back to the allowed host: %v", err)
		}
		if _, err := w.call(t, pid, "relay", fmt.Sprintf(`{"from":%q,"to":%q}`, sink.URL+"/", sink.URL+"/")); err != nil {
			t.Fatalf("unlabelled data flows anywhere allowed: %v", err)
		}
	})
}
