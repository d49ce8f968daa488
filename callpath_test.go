package libos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/mcpserver"
)

const module = "github.com/agentlibos/libos"

// callPath is the path of one tool call from the MCP frame to Pebble, in DESIGN's
// order ("frame → engine adapter → projection → pipeline → (tools | JIT via wasm) →
// syscalls → providers/store"), as the package documentation of package libos lists
// it (TestCallPathIsDocumented).
var callPath = []string{"mcpserver", "engine", "tools", "wasm", "syscalls", "store"}

// stackRecorder is the store's clock (Options via WithStoreClock): the store reads it
// once at the start of every write transaction, on the writer's goroutine, so each
// reading sees the stack of one write on its way to Pebble.
type stackRecorder struct {
	mu     sync.Mutex
	on     bool
	stacks [][]string
}

func (r *stackRecorder) now() time.Time {
	r.mu.Lock()
	on := r.on
	r.mu.Unlock()
	if on {
		pcs := make([]uintptr, 512)
		pcs = pcs[:runtime.Callers(2, pcs)]
		path := modulePackages(pcs)
		r.mu.Lock()
		r.stacks = append(r.stacks, path)
		r.mu.Unlock()
	}
	return time.Now()
}

// record runs f and returns the stacks of the writes made while it ran.
func (r *stackRecorder) record(f func()) [][]string {
	r.mu.Lock()
	r.on, r.stacks = true, nil
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.stacks
}

// modulePackages reduces a stack (innermost frame first, as runtime.Callers gives it)
// to the packages of this module whose code is on it, outermost first, one entry per
// run of frames of the same package. Frames of the standard library and of other
// modules (the MCP SDK, wazero, Pebble) are left out, and so are the test's own. A
// package appears twice exactly when control went down from it and came back into it
// (a callback up the layers) before reaching the write.
func modulePackages(pcs []uintptr) []string {
	var pkgs []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if pkg := packageOf(f.Function); pkg != "" && !strings.HasSuffix(f.File, "_test.go") {
			if len(pkgs) == 0 || pkgs[len(pkgs)-1] != pkg {
				pkgs = append(pkgs, pkg)
			}
		}
		if !more {
			break
		}
	}
	slices.Reverse(pkgs)
	return pkgs
}

// packageOf returns the package of function name relative to the module ("engine",
// "wasm/internal/fuel", "." for the root), or "" for one outside the module.
func packageOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return ""
	}
	pkg := fn[:slash+1+dot]
	switch {
	case pkg == module:
		return "."
	case strings.HasPrefix(pkg, module+"/"):
		return strings.TrimPrefix(pkg, module+"/")
	}
	return ""
}

// checkPath checks one write's stack against the path: every package on it is a
// package of the path, each appears once (control never goes down, back up into a
// package it left, and down again), they come in the path's order, and so there are
// at most len(callPath) of them.
func checkPath(t *testing.T, what string, stack []string) {
	t.Helper()
	last := -1
	seen := map[string]bool{}
	for _, pkg := range stack {
		i := slices.Index(callPath, pkg)
		switch {
		case i < 0:
			t.Errorf("%s: package %s is on the path of a write (%s) but not on the documented path %v", what, pkg, strings.Join(stack, " → "), callPath)
		case seen[pkg]:
			t.Errorf("%s: package %s is entered twice (down, up and down again): %s", what, pkg, strings.Join(stack, " → "))
		case i < last:
			t.Errorf("%s: %s calls up into %s: %s", what, stack[slices.Index(stack, pkg)-1], pkg, strings.Join(stack, " → "))
		}
		seen[pkg] = true
		last = max(last, i)
	}
	if len(stack) > 6 {
		t.Errorf("%s: %d packages on the path of a write, more than 6: %s", what, len(stack), strings.Join(stack, " → "))
	}
}

// mcpSession serves pid over MCP's line transport, as libos serve does, and returns a
// function that sends one request line and reads its answer.
func mcpSession(t *testing.T, sys *libos.System, pid string) func(line string) map[string]any {
	t.Helper()
	ctx := context.Background()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- sys.ServeMCP(ctx, pid, &mcp.IOTransport{Reader: inR, Writer: outW}, mcpserver.Options{})
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeMCP: %v", err)
		}
	})
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	exchange := func(line string) map[string]any {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"notifications/`) {
			return nil
		}
		if !lines.Scan() {
			t.Fatalf("the session ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", lines.Bytes())
		}
		return m
	}
	if m := exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return exchange
}

const putCandidate = `{
	"name": "put_n",
	"description": "Store n under the key n.",
	"source_code": "export async function run(args: { n: number }, libos: any) { await libos.syscall(\"kv.put\", { key: \"n\", value: args.n }); return { n: args.n }; }",
	"input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false},
	"output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false},
	"tests": [{"args": {"n": 2}, "expected": {"n": 2}, "syscalls": [{"name": "kv.put", "args": {"key": "n", "value": 2}, "result": {}}]}]
}`

// The path of one tool call, MCP frame to Pebble, "touches no package twice (no
// down-up-down) and no more than 6 packages", in DESIGN's order: "frame → engine
// adapter → projection → pipeline → (tools | JIT via wasm) → syscalls →
// providers/store. Nothing below calls back up except through an interface that engine
// hands down." Each write to the store while a tools/call runs through the MCP server
// is caught on its way (the store's clock runs at the start of every write
// transaction, on the writer's goroutine) and its stack is reduced to the module's
// packages: (a) a built-in tool (echo) writes its tool_called and its settlement from
// the kernel; (b) a JIT tool's kv.put is written from inside the guest's host call, so
// its stack crosses the guest boundary and holds the whole path.
func TestCallPathMCPToPebble(t *testing.T) {
	ctx := context.Background()
	rec := &stackRecorder{}
	sys, err := libos.Open(ctx, t.TempDir(), libos.WithStoreClock(libos.Options{}, rec.now))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(putCandidate))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		CandidateID string `json:"candidate_id"`
	}
	if err := json.Unmarshal(res.Structured, &p); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(`{"candidate_id":"`+p.CandidateID+`"}`)); err != nil {
		t.Fatal(err)
	}
	call := mcpSession(t, sys, pid)

	for _, c := range []struct {
		what, frame string
		// want is the union of the writes' paths: the packages the call reached.
		want []string
		// deepest is the path of the write that crossed the most packages.
		deepest []string
	}{
		{"a built-in tool (echo)", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`,
			[]string{"mcpserver", "engine", "store"}, []string{"mcpserver", "engine", "store"}},
		{"a JIT tool making one kv.put", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"put_n","arguments":{"n":7}}}`,
			callPath, callPath},
	} {
		var answer map[string]any
		stacks := rec.record(func() { answer = call(c.frame) })
		if r, _ := answer["result"].(map[string]any); r == nil || r["isError"] == true {
			t.Fatalf("%s: %v", c.what, answer)
		}
		if len(stacks) == 0 {
			t.Fatalf("%s: no write was seen", c.what)
		}
		reached := map[string]bool{}
		var deepest []string
		for _, s := range stacks {
			t.Logf("%s: write from %s", c.what, strings.Join(s, " → "))
			checkPath(t, c.what, s)
			if len(s) == 0 || s[0] != "mcpserver" {
				t.Errorf("%s: a write not made under the MCP frame: %s", c.what, strings.Join(s, " → "))
			}
			for _, pkg := range s {
				reached[pkg] = true
			}
			if len(s) > len(deepest) {
				deepest = s
			}
		}
		var union []string
		for _, pkg := range callPath {
			if reached[pkg] {
				union = append(union, pkg)
			}
		}
		if !slices.Equal(union, c.want) {
			t.Errorf("%s reached %v, want %v", c.what, union, c.want)
		}
		if !slices.Equal(deepest, c.deepest) {
			t.Errorf("%s: the deepest write came from %v, want %v", c.what, deepest, c.deepest)
		}
	}
	got, err := sys.Runtime().Tools.Call(ctx, pid, "echo", json.RawMessage(`{}`))
	if err != nil || got.Text != "{}" {
		t.Fatalf("echo after the calls: %v %v", got, err)
	}
}

// The path is "written in DESIGN order in the package docs": the numbered list under
// "The path of one tool call" in package libos's documentation names the packages of
// callPath, in its order, and the package documentation of each of them says where it
// stands on the path.
func TestCallPathIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "// # The path of one tool call")
	if !ok {
		t.Fatal(`doc.go has no section "The path of one tool call"`)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\s+\d+\. (\w+):`).FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	if !slices.Equal(listed, callPath) {
		t.Errorf("doc.go lists the path as %v, the calls take %v", listed, callPath)
	}
	for i, pkg := range callPath {
		src, err := os.ReadFile(pkg + "/doc.go")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("step %d of %d", i+1, len(callPath))
		if !strings.Contains(strings.Join(strings.Fields(string(src)), " "), "The path of one tool call") || !strings.Contains(string(src), want) {
			t.Errorf("%s/doc.go does not place the package on the path of one tool call (%q)", pkg, want)
		}
	}
}
