package tools_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/tools"
)

// readerSource returns what kv.get found under args.key.
const readerSource = `export async function run(args: any, libos: any) {
  const got = await libos.syscall("kv.get", { key: args.key });
  return { found: got.found, value: got.found ? got.value : null };
}`

// TestExportConsultsDataFlowRules: export "refuses, with a typed error naming the
// reason, a call … whose data the image's data-flow rules forbid exporting (labelled
// values)". A label a rule of the image names is kept from an exported tape (a file
// goes where no sink is checked); a label no rule names, and unlabelled data, export;
// a rule can keep a label from export alone with deny: [export].
func TestExportConsultsDataFlowRules(t *testing.T) {
	w := newWorld(t)
	labels := "labels:\n  kv: {\"hr/*\": confidential, \"team/*\": internal}\n"
	for _, tc := range []struct {
		rule, rules string
		key         string
		forbidden   string // the label named in the refusal, "" when the export passes
	}{
		{"a confidential read under a rule that denies net.fetch is not exported", "  - {label: confidential, deny: [net.fetch]}\n", "hr/salary", "confidential"},
		{"a label no rule names is exported", "  - {label: confidential, deny: [net.fetch]}\n", "team/notes", ""},
		{"unlabelled data is exported", "  - {label: confidential, deny: [net.fetch]}\n", "public/x", ""},
		{"deny: [export] keeps a label from export alone", "  - {label: internal, deny: [export]}\n", "team/notes", "internal"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			img := fetchImage(t, labels+"data_flow:\n"+tc.rules)
			pid := w.spawnWithTool(t, img, "reader", readerSource)
			w.register(t, pid, "writer", `export async function run(args: any, libos: any) {
  await libos.syscall("kv.put", { key: args.key, value: { secret: "s3cr3t-payload" } });
  return {};
}`)
			w.mustCall(t, pid, "writer", `{"key":`+jsonString(tc.key)+`}`)
			call, err := w.callID(t, pid, "reader", `{"key":`+jsonString(tc.key)+`}`)
			if err != nil {
				t.Fatal(err)
			}
			tc2, err := tools.ExportTape(w.st, pid, call)
			if tc.forbidden == "" {
				if err != nil {
					t.Fatalf("export: %v", err)
				}
				if len(tc2.Syscalls) != 1 || tc2.Syscalls[0].Name != "kv.get" {
					t.Fatalf("exported %+v", tc2)
				}
				return
			}
			if !codeIs(err, tools.CodeExportForbidden) || !strings.Contains(err.Error(), tc.forbidden) {
				t.Fatalf("export: %v, want export_forbidden naming %s", err, tc.forbidden)
			}
			if strings.Contains(err.Error(), "s3cr3t-payload") {
				t.Fatalf("the refusal carries the labelled value: %v", err)
			}
		})
	}
}

// TestExportRefusesAnUnsettledCall: export refuses "a call that is unsettled" with
// call_unsettled, and replay says not_replayable with that code: the call is still
// waiting (here on an operator approval of its kv.put) and has no result to expect.
func TestExportRefusesAnUnsettledCall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	manifest := "format: libos.image/v1\nname: guarded\nversion: 1.0.0\n" +
		"tools: [echo, propose_jit_tool, validate_jit_tool, register_jit_tool]\n" +
		"capabilities: [kv:read, kv:write]\napprovals:\n  routes: {write: operator}\n"
	img, err := image.ParseImage([]byte(manifest), nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := w.spawnWithTool(t, img, "put", `export async function run(args: any, libos: any) {
  await libos.syscall("kv.put", { key: "k", value: 1 });
  return { ok: true };
}`)
	done := make(chan error, 1)
	go func() {
		_, err := w.k.HandleFrame(ctx, pid, []byte(`{"name":"put","arguments":{}}`))
		done <- err
	}()
	var pending engine.Approval
	for i := 0; ; i++ {
		as, err := w.k.Approvals(pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 && as[0].State == engine.ApprovalPending {
			pending = as[0]
			break
		}
		if i > 2000 {
			t.Fatal("the call never asked for approval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	open := openCalls(t, w.events(t, pid))
	var call string
	for id, tool := range open {
		if tool == "put" {
			call = id
		}
	}
	if call == "" {
		t.Fatalf("no open call of put: %v", open)
	}
	if _, err := tools.ExportTape(w.st, pid, call); !codeIs(err, tools.CodeCallUnsettled) {
		t.Fatalf("export of a call that waits: %v, want call_unsettled", err)
	}
	r, err := tools.Replay(ctx, w.st, sandbox(t), pid, call, tools.ReplayOptions{})
	if err != nil || r.Verdict != tools.VerdictNotReplayable || r.Code != string(tools.CodeCallUnsettled) {
		t.Fatalf("replay of a call that waits: %+v %v", r, err)
	}
	if err := w.k.Deny(ctx, pending.ID, "not now"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the denied call succeeded")
	}
}
