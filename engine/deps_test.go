package engine_test

import (
	"go/build"
	"path/filepath"
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
