package engine_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/agentlibos/libos/engine"
)

// DESIGN: "Data flows one way … Nothing below calls back up except through an
// interface that engine hands down." What a handler needs to run (its arguments, its
// syscall authority, its sandbox bounds, its identity) is on the Call as values, so a
// handler on its way to the sandbox and the router runs no code of the kernel (the
// stack of each write proves the path: TestCallPathMCPToPebble in package libos). The
// Call's methods are the kernel's own operations on the calling process, which only
// the tools that change it use: the JIT lifecycle's register (ToolKinds, InstallTool)
// and the Skill tools (ActivateSkill, DeactivateSkill); and Return, which keeps the
// handler's result on the Call for the pipeline to read after the handler returned
// (the answer going back up, not a call into the kernel's state); and Defer, which
// likewise leaves work on the Call (a sandbox instance's restore) for the pipeline to
// run while the settlement syncs, without calling into the kernel. A new method here is
// a new way back up into the kernel and must be one of those.
func TestCallHandsValuesDown(t *testing.T) {
	want := []string{"ActivateSkill", "DeactivateSkill", "Defer", "InstallTool", "Return", "ToolKinds"}
	typ := reflect.TypeOf(&engine.Call{})
	var got []string
	for i := range typ.NumMethod() {
		got = append(got, typ.Method(i).Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("engine.Call's methods are %v, want %v: what a handler reads must be a field", got, want)
	}
	for _, field := range []string{"Args", "Value", "Syscalls", "Sandbox", "CallID", "Tool", "Depth"} {
		if _, ok := typ.Elem().FieldByName(field); !ok {
			t.Errorf("engine.Call has no field %s", field)
		}
	}
}
