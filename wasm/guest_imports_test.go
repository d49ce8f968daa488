package wasm

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestGuestImportsOnlyLibos reads the guest's import section: "The module imports nothing
// from WASI — only a libos host module (time, interrupt/poll, syscall, log). A test reads
// the module's import section and fails on any other import."
func TestGuestImportsOnlyLibos(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, guestWasm)
	if err != nil {
		t.Fatal(err)
	}
	// The ABI (guest/ABI.md): these imports, with these signatures, and nothing else.
	want := map[string]string{
		"now_ms":       "() -> (f64)",
		"poll":         "() -> (i32)",
		"syscall":      "(i32,i32,i32,i32) -> (i32)",
		"syscall_take": "(i32) -> ()",
		"log":          "(i32,i32,i32) -> ()",
		"fuel":         "(i64) -> (i64)",
	}
	got := map[string]string{}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "libos" {
			t.Errorf("import %s.%s: the guest may import only from module libos", mod, name)
			continue
		}
		got[name] = signature(f.ParamTypes(), f.ResultTypes())
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		t.Errorf("imported memory %s.%s: the guest owns its memory", mod, name)
	}
	for name, sig := range got {
		if want[name] == "" {
			t.Errorf("import libos.%s is not in the ABI", name)
		} else if sig != want[name] {
			t.Errorf("import libos.%s has signature %s, the ABI says %s", name, sig, want[name])
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("the ABI's import libos.%s is missing", name)
		}
	}

	// Exports: exactly the ABI's functions and its memory.
	var exports []string
	for name := range cm.ExportedFunctions() {
		exports = append(exports, name)
	}
	sort.Strings(exports)
	wantExports := []string{"_initialize", "libos_alloc", "libos_break", "libos_compile", "libos_free", "libos_out_len", "libos_out_ptr", "libos_prepare", "libos_run"}
	if len(exports) != len(wantExports) {
		t.Errorf("exported functions %v, the ABI says %v", exports, wantExports)
	} else {
		for i := range exports {
			if exports[i] != wantExports[i] {
				t.Errorf("exported functions %v, the ABI says %v", exports, wantExports)
				break
			}
		}
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok || len(cm.ExportedMemories()) != 1 {
		t.Errorf("exported memories %v, the ABI says exactly one named memory", cm.ExportedMemories())
	}
}

func signature(params, results []api.ValueType) string {
	s := "("
	for i, p := range params {
		if i > 0 {
			s += ","
		}
		s += api.ValueTypeName(p)
	}
	s += ") -> ("
	for i, r := range results {
		if i > 0 {
			s += ","
		}
		s += api.ValueTypeName(r)
	}
	return s + ")"
}

// The guest never runs a call on the state an earlier call used: with the restore flag
// it leaves that state to the host's snapshot, and if the host does not restore it the
// next call is refused (ABI.md) rather than run where the earlier one left off.
func TestGuestRefusesAnUnrestoredState(t *testing.T) {
	h := newBareHost(t)
	const program = `function run() { globalThis.n = (globalThis.n || 0) + 1; return n; }`
	if status, out := h.runFlags(t, program, runRestore); status != 0 || out != "1" {
		t.Fatalf("first call: status %d, %s", status, out)
	}
	status, out := h.runFlags(t, program, runRestore)
	if status != 1 || !strings.Contains(out, `"code":"guest_error"`) {
		t.Fatalf("second call on an unrestored state: status %d, %s; want guest_error", status, out)
	}
	// Without the flag the guest frees its state and builds a fresh one for each call.
	h2 := newBareHost(t)
	for i := 0; i < 2; i++ {
		if status, out := h2.run(t, program); status != 0 || out != "1" {
			t.Fatalf("call %d without the flag: status %d, %s", i+1, status, out)
		}
	}
}
