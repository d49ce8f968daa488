package libos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/mcpserver"
)

const addCandidate = `{
	"name": "add",
	"description": "Add two integers.",
	"source_code": "export function run(args: { a: number, b: number }) { return { sum: args.a + args.b }; }",
	"input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
		"required": ["a", "b"], "additionalProperties": false},
	"output_schema": {"type": "object", "properties": {"sum": {"type": "integer"}},
		"required": ["sum"], "additionalProperties": false},
	"tests": [{"args": {"a": 2, "b": 3}, "expected": {"sum": 5}, "syscalls": []}]
}`

func open(t *testing.T, dir string) *libos.System {
	t.Helper()
	sys, err := libos.Open(context.Background(), dir, libos.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

func register(t *testing.T, sys *libos.System, pid string) {
	t.Helper()
	ctx := context.Background()
	res, err := sys.Runtime().Tools.Call(ctx, pid, "propose_jit_tool", json.RawMessage(addCandidate))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		CandidateID string `json:"candidate_id"`
	}
	_ = json.Unmarshal(res.Structured, &p)
	if _, err := sys.Runtime().Tools.Call(ctx, pid, "register_jit_tool", json.RawMessage(`{"candidate_id":"`+p.CandidateID+`"}`)); err != nil {
		t.Fatal(err)
	}
}

func callAdd(t *testing.T, sys *libos.System, pid string) {
	t.Helper()
	res, err := sys.HandleFrame(context.Background(), pid, []byte(`{"name":"add","arguments":{"a":1,"b":2}}`))
	if err != nil {
		t.Fatalf("add in %s: %v", pid, err)
	}
	if res.Text != `{"sum":3}` {
		t.Fatalf("add in %s = %s", pid, res.Text)
	}
}

// DESIGN, JIT tools: "Rehydrate: reopening the store restores processes and their
// committed JIT bindings. A fork of a checkpoint is a new process with new identities."
// Open wires the kernel with the JIT lifecycle one way, so both hold for an embedder
// without further calls (with the README's earlier wiring, Fork refused checkpoints
// that held JIT tools).
func TestOpenRestoresAndForksJITTools(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sys := open(t, dir)
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	register(t, sys, pid)
	callAdd(t, sys, pid)
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sys.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}

	sys = open(t, dir)
	defer sys.Close()
	if err := sys.RehydrateErr(); err != nil {
		t.Fatalf("rehydrate: %v", err)
	}
	callAdd(t, sys, pid)
	cp, err := sys.Checkpoint(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	forked, err := sys.Fork(ctx, cp)
	if err != nil {
		t.Fatalf("fork of a checkpoint holding a JIT tool: %v", err)
	}
	if forked == pid {
		t.Fatal("the fork has the original's PID")
	}
	callAdd(t, sys, forked)
}

// "A store admits one System at a time": the second Open is refused with an error
// that names the condition, and loses nothing.
func TestOpenStoreInUse(t *testing.T) {
	dir := t.TempDir()
	sys := open(t, dir)
	defer sys.Close()
	_, err := libos.Open(context.Background(), dir, libos.Options{})
	if !errors.Is(err, libos.ErrStoreInUse) {
		t.Fatalf("second Open = %v, want ErrStoreInUse", err)
	}
}

// Options.ReadOnly: "Open writes nothing into dir and does not create it; every
// method that writes fails with an error matching ErrReadOnly; a writable System
// holding the store makes it fail with ErrStoreInUse, and the other way round; it does
// not combine with Cluster."
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing")
	ro, err := libos.Open(ctx, missing, libos.Options{ReadOnly: true, LazySandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := ro.ListProcesses(); err != nil || len(ps) != 0 {
		t.Fatalf("ListProcesses of a missing store: %v, %v", ps, err)
	}
	img, _ := libos.DefaultImage()
	if _, err := ro.SpawnImage(ctx, img); !errors.Is(err, libos.ErrReadOnly) {
		t.Fatalf("SpawnImage on a read-only System: %v, want ErrReadOnly", err)
	}
	ro.Close()
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a read-only Open created the directory: %v", err)
	}

	dir := t.TempDir()
	sys := open(t, dir)
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := libos.Open(ctx, dir, libos.Options{ReadOnly: true, LazySandbox: true}); !errors.Is(err, libos.ErrStoreInUse) {
		t.Fatalf("a read-only Open beside a writable System = %v, want ErrStoreInUse", err)
	}
	sys.Close()
	ro, err = libos.Open(ctx, dir, libos.Options{ReadOnly: true, LazySandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Process(pid); err != nil {
		t.Fatalf("the process is not shown: %v", err)
	}
	if _, err := libos.Open(ctx, dir, libos.Options{}); !errors.Is(err, libos.ErrStoreInUse) {
		t.Fatalf("a writable Open beside a read-only System = %v, want ErrStoreInUse", err)
	}
	ro.Close()
	_, err = libos.Open(ctx, dir, libos.Options{ReadOnly: true, Cluster: &libos.ClusterOptions{}})
	if liberr.CodeOf(err) != liberr.CodeInvalidConfig {
		t.Fatalf("ReadOnly with Cluster = %v, want invalid_config", err)
	}
}

// Options.CacheDir: "A directory that cannot be used fails Open with an error that
// matches ErrCache." A regular file where the directory should be is one.
func TestOpenUnusableCache(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "below")} {
		_, err := libos.Open(context.Background(), t.TempDir(), libos.Options{CacheDir: dir})
		if !errors.Is(err, libos.ErrCache) {
			t.Errorf("CacheDir %s: Open = %v, want ErrCache", dir, err)
		}
		if err := libos.WarmCache(context.Background(), dir); !errors.Is(err, libos.ErrCache) {
			t.Errorf("CacheDir %s: WarmCache = %v, want ErrCache", dir, err)
		}
	}
}

// Options.OnCacheUnusable: "a CacheDir that cannot be used [is] no failure: the guest
// is compiled in memory and OnCacheUnusable is called once, from the compile, with the
// error (matching ErrCache)", and CacheDir is looked at "by the guest's compile only: in
// Open, or with LazySandbox at the first JIT tool call". Open on a cache directory
// under a regular file succeeds, reporting once at Open, or with LazySandbox not at
// all, and a System that compiles nothing never reports.
func TestOpenReportsAnUnusableCacheOnceAndCompilesInMemory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lazy := range []bool{false, true} {
		var reports []error
		sys, err := libos.Open(context.Background(), t.TempDir(), libos.Options{CacheDir: filepath.Join(file, "cache"), LazySandbox: lazy,
			OnCacheUnusable: func(err error) { reports = append(reports, err) }})
		if err != nil {
			t.Fatalf("lazy %v: Open = %v, want the guest compiled in memory", lazy, err)
		}
		sys.Close()
		if want := map[bool]int{false: 1, true: 0}[lazy]; len(reports) != want {
			t.Fatalf("lazy %v: %d reports, want %d: %v", lazy, len(reports), want, reports)
		}
		if !lazy && !errors.Is(reports[0], libos.ErrCache) {
			t.Errorf("reported %v, want an error matching ErrCache", reports[0])
		}
	}
}

// WarmCache "compiles the sandbox guest into the compilation cache in dir, and keeps
// there the snapshot of the state every call starts from": after it, the directory holds
// the compiled guest and the snapshot, and a System opened on it works.
func TestWarmCache(t *testing.T) {
	cache := t.TempDir()
	if err := libos.WarmCache(context.Background(), cache); err != nil {
		t.Fatal(err)
	}
	n, snaps := 0, 0
	_ = filepath.WalkDir(cache, func(p string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			n++
			if strings.HasPrefix(filepath.Base(filepath.Dir(p)), "libos-snapshot-") {
				snaps++
			}
		}
		return nil
	})
	if n == 0 {
		t.Fatal("WarmCache left the cache directory empty")
	}
	if snaps != 1 {
		t.Fatalf("WarmCache kept %d snapshots, want 1", snaps)
	}
	sys, err := libos.Open(context.Background(), t.TempDir(), libos.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	sys.Close()
}

// "libos version prints the guest sha256 and QuickJS release ... with the module
// version, Go version and platform."
func TestVersion(t *testing.T) {
	v := libos.Version()
	if v.Guest.SHA256 == "" || v.Guest.QuickJSRelease == "" || v.Module == "" || v.Wazero == "" {
		t.Errorf("incomplete: %+v", v)
	}
	if v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("toolchain and platform: %+v", v)
	}
}

// "the README's embedding section is one of those examples, verbatim": the body of
// Example, one tab less indented, is a Go block of README.md.
func TestREADMEEmbeddingIsTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "\nfunc Example() {\n")
	if start < 0 {
		t.Fatal("example_test.go has no func Example")
	}
	body := s[start+len("\nfunc Example() {\n"):]
	body = body[:strings.Index(body, "\n}\n")+1]
	var lines []string
	for _, l := range strings.SplitAfter(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	block := "```go\n" + strings.Join(lines, "") + "```\n"
	if !strings.Contains(string(readme), block) {
		t.Fatalf("README.md does not hold the body of Example verbatim; want the block\n%s", block)
	}
}

// Options.SkipJITRestore: "so that Open itself writes nothing (installing a tool again
// is recorded in the process's event log)". Opening twice that way leaves the log as
// it was; opening normally installs the tool again and records it.
func TestSkipJITRestoreWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sys := open(t, dir)
	img, _ := libos.DefaultImage()
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	register(t, sys, pid)
	sys.Close()
	count := func(o libos.Options) (int, bool) {
		t.Helper()
		s, err := libos.Open(ctx, dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		evs, err := s.Events(pid, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Process(pid)
		if err != nil {
			t.Fatal(err)
		}
		_, has := info.Tools["add"]
		return len(evs), has
	}
	n1, has := count(libos.Options{SkipJITRestore: true})
	n2, _ := count(libos.Options{SkipJITRestore: true})
	if n1 != n2 || has {
		t.Fatalf("SkipJITRestore: %d then %d events, tool installed %v", n1, n2, has)
	}
	if n3, has := count(libos.Options{}); n3 <= n2 || !has {
		t.Fatalf("a normal Open: %d events after %d, tool installed %v", n3, n2, has)
	}
}

// "a bad stdio line gets a JSON-RPC error (id null where unknown) and the session goes
// on": ServeMCP on the SDK's line transport answers a line with trailing bytes with a
// protocol_frame error and then answers the next request, as `libos serve` does.
func TestServeMCPLineTransportSurvivesABadLine(t *testing.T) {
	ctx := context.Background()
	sys := open(t, t.TempDir())
	img, err := libos.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- sys.ServeMCP(ctx, pid, &mcp.IOTransport{Reader: inR, Writer: outW}, mcpserver.Options{})
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]any {
		if !lines.Scan() {
			t.Fatalf("the session ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", lines.Bytes())
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := read(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}} x`)
	m := read()
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if data["code"] != "protocol_frame" {
		t.Fatalf("a line with trailing bytes: %v, want a protocol_frame error", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"after":"bad line"}}}`)
	if m := read(); m["result"] == nil || fmt.Sprint(m["id"]) != "3" {
		t.Fatalf("the session did not go on: %v", m)
	}
	inW.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeMCP: %v", err)
	}
}

// Options.SkipJITRestore: "registering a tool and forking a checkpoint that holds JIT
// tools work as usual". The kernel owns the one JIT wiring (engine.Config.JIT) in
// every mode Open offers; skipping the restore only leaves the restored processes'
// tools out of their tables.
func TestSkipJITRestoreForks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sys := open(t, dir)
	img, _ := libos.DefaultImage()
	pid, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	register(t, sys, pid)
	cp, err := sys.Checkpoint(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	sys.Close()

	sys, err = libos.Open(ctx, dir, libos.Options{SkipJITRestore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	forked, err := sys.Fork(ctx, cp)
	if err != nil {
		t.Fatalf("fork of a checkpoint holding a JIT tool with SkipJITRestore: %v", err)
	}
	callAdd(t, sys, forked)
	fresh, err := sys.SpawnImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	register(t, sys, fresh)
	callAdd(t, sys, fresh)
}
