package jsbundle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
)

// knownSources are every source the package's tests and the candidate table know: the
// datadriven cases, the fuzz corpus, the benchmark candidate and the JIT candidates.
func knownSources(t *testing.T) map[string]string {
	t.Helper()
	srcs := map[string]string{}
	for _, c := range readCases(t, "testdata/compile.txt") {
		srcs["case "+c.name] = c.src
	}
	files, _ := filepath.Glob("testdata/fuzz/FuzzCompile/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if q, ok := strings.CutPrefix(line, "string("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				srcs["fuzz "+filepath.Base(f)] = s
			}
		}
	}
	bench, err := os.ReadFile("testdata/bench_candidate.ts")
	if err != nil {
		t.Fatal(err)
	}
	srcs["bench_candidate"] = string(bench)
	cands, _ := filepath.Glob("../testdata/candidates/*.json")
	for _, f := range cands {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Source string `json:"source_code"`
		}
		if json.Unmarshal(data, &c) == nil && c.Source != "" {
			srcs["candidate "+filepath.Base(f)] = c.Source
		}
	}
	return srcs
}

// Rule (doc.go): "esbuild decides what is global": the checking transform replaces every
// free use of a watched global. When the first output names no watched global, that
// transform has nothing to replace, so skipping it must not change a single diagnostic, a
// position or a byte of the Program. Every known source, as written and with a comment
// naming every watched global (comments do not reach the output), compiles the same with
// and without the checking transform forced.
func TestSkippedProbeChangesNothing(t *testing.T) {
	srcs := knownSources(t)
	if len(srcs) < 150 {
		t.Fatalf("only %d known sources", len(srcs))
	}
	skipped := 0
	for name, src := range srcs {
		for _, variant := range []string{src, src + "\n// eval Function require Deno WebAssembly process globalThis self window import.meta\n"} {
			p1, d1 := compile(variant, Options{}, false)
			p2, d2 := compile(variant, Options{}, true)
			if !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(d1, d2) {
				t.Errorf("%s: skipping the checking transform changed the result:\nskipped: %+v %+v\nprobed:  %+v %+v\nsource:\n%s", name, p1, d1, p2, d2, variant)
			}
			if main := api.Transform(variant, mainOptions); len(main.Errors) == 0 && !namesWatched(string(main.Code)) {
				skipped++
			}
		}
	}
	// The comparison is only worth something if the skip happens on many of them.
	if skipped < len(srcs) {
		t.Errorf("the checking transform was skippable for only %d of %d compiles", skipped, 2*len(srcs))
	}
}

// Rule (doc.go): the checking transform is skipped only when the output cannot hold a use of
// a watched global. Any word equal to a watched name (identifier, property, string or
// escaped identifier as esbuild prints it) means the transform runs.
func TestNamesWatched(t *testing.T) {
	for _, c := range []struct {
		code string
		want bool
	}{
		{"return eval;", true},
		{"x.process();", true},
		{`const s = "itself is not self";`, true},
		{"import.meta.url", true},
		{"typeof window", true},
		{"globalThis.x", true},
		{"new Function()", true},
		{"WebAssembly", true},
		{"require", true},
		{"Deno", true},
		{"a\\u00E9eval", false}, // the identifier aéeval, as the ASCII charset prints it
		{"evaluate(itself, selfish, processed, required, windows, metadata, FunctionX, $eval, eval_)", false},
		{"const observed = await libos.syscall(\"clock.now\", {});", false},
		{"", false},
	} {
		if got := namesWatched(c.code); got != c.want {
			t.Errorf("namesWatched(%q) = %v, want %v", c.code, got, c.want)
		}
	}
}

// Rule (RATIONALE: esbuild decides what is global): an escaped reference is printed under
// its decoded name, so the skip never hides it.
func TestEscapedGlobalStillProbed(t *testing.T) {
	src := "export function run() { return \\u0065val; }\n"
	main := api.Transform(src, mainOptions)
	if !namesWatched(string(main.Code)) {
		t.Fatalf("output %q does not name eval", main.Code)
	}
	if _, d := Compile(src, Options{}); len(d) != 1 || d[0].Code != CodeEvalForbidden || d[0].Column != 32 {
		t.Fatalf("got %+v", d)
	}
}
