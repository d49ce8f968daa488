package engine_test

import (
	"go/build"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// "syscalls no longer imports wasm (go list -deps ./engine shows no wazero)": a kernel
// embedded without JIT tools links neither the sandbox nor its runtime. The walk
// follows the module's own packages from engine and fails on the first import of the
// sandbox or of wazero.
func TestEngineLinksNoSandbox(t *testing.T) {
	const module = "github.com/agentlibos/libos"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(pkg string, path []string)
	walk = func(pkg string, path []string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(pkg, module)), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			chain := append(append([]string(nil), path...), imp)
			if imp == module+"/wasm" || strings.HasPrefix(imp, "github.com/tetratelabs/wazero") {
				t.Errorf("engine links the sandbox: %s", strings.Join(chain, " → "))
				continue
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				walk(imp, chain)
			}
		}
	}
	walk(module+"/engine", []string{module + "/engine"})
}

// The same rule as the command states it: "go list -deps ./engine | grep wazero is
// empty". This one also sees the module's dependencies: a package outside the module
// that linked wazero would fail it.
func TestGoListDepsOfEngineHasNoWazero(t *testing.T) {
	goTool, err := exec.LookPath(filepath.Join(runtime.GOROOT(), "bin", "go"))
	if err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to run go list with")
		}
	}
	cmd := exec.Command(goTool, "list", "-deps", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || !slices.Contains(deps, "github.com/agentlibos/libos/engine") {
		t.Fatalf("go list -deps listed %d packages, without engine itself", len(deps))
	}
	for _, d := range deps {
		if strings.Contains(d, "wazero") || d == "github.com/agentlibos/libos/wasm" {
			t.Errorf("engine depends on %s", d)
		}
	}
}
