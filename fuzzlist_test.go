package libos_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryFuzzTarget: "make fuzz (every target, FUZZTIME each)"
// (RELIABILITY.md). Every func FuzzX in the module's tests is named, with its package, in
// the Makefile's fuzz target, and the target names none that does not exist.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?ms)^fuzz:\n(.*?)\n\n`).FindSubmatch(mk)
	if rule == nil {
		t.Fatal("the Makefile has no fuzz target")
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`([a-z][a-z0-9/_]*):(Fuzz[A-Za-z0-9_]+)`).FindAllSubmatch(rule[1], -1) {
		listed[string(m[1])+":"+string(m[2])] = true
	}
	found := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "build" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			found[filepath.ToSlash(filepath.Dir(path))+":"+string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale []string
	for f := range found {
		if !listed[f] {
			missing = append(missing, f)
		}
	}
	for f := range listed {
		if !found[f] {
			stale = append(stale, f)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(found) == 0 || len(missing) > 0 || len(stale) > 0 {
		t.Errorf("make fuzz and the fuzz targets differ: %d found; not run by make fuzz: %v; named but not found: %v", len(found), missing, stale)
	}
}
