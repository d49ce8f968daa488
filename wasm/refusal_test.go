package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/liberr"
)

// guest/ABI.md: "When that very Error object escapes run (a js_error), the error object
// carries refusal: the code the host refused with, known by the object's identity
// (whatever the program did to its code)". A program's own error with the same text is
// not a refusal.
func TestRefusalKnownByIdentity(t *testing.T) {
	e := hostTestEngine(t)
	deny := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		return nil, liberr.New("", "capability_denied", "kv.get needs kv:read")
	})
	for _, tc := range []struct {
		rule, program, refusal string
	}{
		{"an uncaught refusal", `async function run(args, libos) { await libos.syscall("kv.get", {key: "a"}); }`, "capability_denied"},
		{"a refusal rethrown as it is", `async function run(args, libos) {
			try { await libos.syscall("kv.get", {key: "a"}); } catch (e) { throw e; } }`, "capability_denied"},
		{"a refusal whose code the program changed", `async function run(args, libos) {
			try { await libos.syscall("kv.get", {key: "a"}); } catch (e) { e.code = "nothing"; throw e; } }`, "capability_denied"},
		{"a new error with the refusal's text", `async function run(args, libos) {
			try { await libos.syscall("kv.get", {key: "a"}); } catch (e) { throw new Error(e.message); } }`, ""},
		{"an error of the program's own", `function run() { throw new Error("kv.get needs kv:read"); }`, ""},
		{"the guest's own refusal of bad arguments", `async function run(args, libos) { await libos.syscall(1, {}); }`, ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := e.Run(hostCtx(t), tc.program, json.RawMessage(`{}`), deny, Options{Seed: 1})
			var we *Fault
			if !errors.As(err, &we) || we.Code != CodeJSError {
				t.Fatalf("Run: %v, want a js_error", err)
			}
			if we.Refusal != tc.refusal {
				t.Fatalf("Refusal = %q, want %q (%v)", we.Refusal, tc.refusal, err)
			}
		})
	}
}
