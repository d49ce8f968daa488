package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClient is a session of the official Go SDK's client with the server's
// list_changed notifications counted.
type mcpClient struct {
	cs      *mcp.ClientSession
	mu      sync.Mutex
	changed chan struct{}
}

// startServe starts 'libos serve --data data ARGS...' with an MCP client on its stdio and
// returns the client, the command and what it writes to stderr.
func startServe(t *testing.T, ctx context.Context, data string, args ...string) (*mcpClient, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(libosBin, append([]string{"serve", "--data", data}, args...)...)
	cmd.Env = testEnv(t)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	return newClient(t, ctx, &mcp.CommandTransport{Command: cmd}), cmd, stderr
}

func newClient(t *testing.T, ctx context.Context, tr mcp.Transport) *mcpClient {
	t.Helper()
	c := &mcpClient{changed: make(chan struct{}, 16)}
	client := mcp.NewClient(&mcp.Implementation{Name: "libos-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.changed <- struct{}{}
		},
	})
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c.cs = cs
	return c
}

func (c *mcpClient) toolNames(t *testing.T, ctx context.Context) []string {
	t.Helper()
	res, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// call sends tools/call with raw arguments (nil sends none).
func (c *mcpClient) call(ctx context.Context, name string, args string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	return c.cs.CallTool(ctx, p)
}

func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", r.Content[0])
	}
	return tc.Text
}

// errorCode is the typed code an isError result carries in its _meta.
func errorCode(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if r.StructuredContent != nil {
		t.Errorf("an isError result carries structuredContent %v", r.StructuredContent)
	}
	b, _ := json.Marshal(r.Meta["libos/error"])
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Code
}

// checkEchoPath runs the transport-independent checks of the echo path on a served
// direct-projection process.
func checkEchoPath(t *testing.T, ctx context.Context, c *mcpClient) {
	t.Helper()
	// "tools/list is the process's projection": the default image in direct mode.
	if got := c.toolNames(t, ctx); !containsAll(got, "echo") || contains(got, "run_jit_tool") {
		t.Fatalf("direct projection lists %v", got)
	}

	// "results carry structuredContent and text content", both the canonical form;
	// 2^53+1 survives (no float64 round trip) and the nested action is data.
	res, err := c.call(ctx, "echo", `{"b":9007199254740993,"a":[true,null,"x"],"nested":{"action":"kept"}}`)
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	const canon = `{"a":[true,null,"x"],"b":9007199254740993,"nested":{"action":"kept"}}`
	if got := textOf(t, res); got != canon {
		t.Errorf("text content = %s, want %s", got, canon)
	}
	// The SDK decodes structuredContent into Go values; compare its text form.
	var sc map[string]json.RawMessage
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &sc); err != nil || len(sc) != 3 {
		t.Errorf("structuredContent = %s", raw)
	}

	// "removes any top-level action argument"; "trims the function name".
	res, err = c.call(ctx, "  echo\t", `{"action":"other_tool","k":1}`)
	if err != nil || res.IsError || textOf(t, res) != `{"k":1}` {
		t.Fatalf("echo with padded name and top-level action: %v %+v", err, res)
	}

	// "Unknown or hidden tool names are projection or process-tool-table failures":
	// a tool error with its typed code, not a protocol error.
	res, err = c.call(ctx, "no_such_tool", `{}`)
	if err != nil || !res.IsError || !strings.HasPrefix(textOf(t, res), "unknown_tool: ") || errorCode(t, res) != "unknown_tool" {
		t.Fatalf("unknown tool: %v %+v", err, res)
	}

	// "arrays, scalars, booleans, and malformed JSON are rejected before echo runs"
	// as protocol-frame failures: a JSON-RPC error, no result.
	for _, bad := range []string{`[1,2]`, `"text"`, `true`, `{"a":1,"a":2}`} {
		_, err = c.call(ctx, "echo", bad)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(we.Data), `"code":"protocol_frame"`) {
			t.Errorf("arguments %s: want a JSON-RPC invalid-params error with code protocol_frame, got %v", bad, err)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func containsAll(s []string, vs ...string) bool {
	for _, v := range vs {
		if !contains(s, v) {
			return false
		}
	}
	return true
}

func TestServeStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	c, cmd, stderr := startServe(t, ctx, data)
	checkEchoPath(t, ctx, c)
	if err := c.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// Closing stdin ends serve normally.
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("serve did not exit 0 after stdin closed: %v\n%s", cmd.ProcessState, stderr.String())
	}
	// Everything acknowledged is in the store, and the log verifies.
	pid := spawnedPID(t, stderr)
	r := libos(t, "", "events", pid, "--verify", "--data", data)
	if r.code != 0 || strings.Count(r.stdout, "tool_result") != 2 || !strings.Contains(r.stderr, "hash chain intact") {
		t.Fatalf("events --verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

var pidRE = regexp.MustCompile(`pid=(pid_[0-9a-f]{32})`)

// spawnedPID is the PID serve logs on stderr. os/exec copies a child's stderr in a
// goroutine of its own, so the line may reach buf some time after the server answers
// on stdout: wait for it (up to 10 s) instead of reading buf once.
func spawnedPID(t *testing.T, buf *syncBuffer) string {
	t.Helper()
	m, ok := buf.waitFor(pidRE, 10*time.Second)
	if !ok {
		t.Fatalf("no pid in the log:\n%s", buf.String())
	}
	return m[1]
}

// TestSpawnedPIDWaitsForTheLine: the PID line may reach the buffer after the test
// asks for it (os/exec copies stderr in its own goroutine); spawnedPID must wait for
// it rather than read what is there at that instant.
func TestSpawnedPIDWaitsForTheLine(t *testing.T) {
	buf := &syncBuffer{}
	const pid = "pid_0123456789abcdef0123456789abcdef"
	go func() {
		_, _ = buf.Write([]byte("time=... level=INFO msg=\"starting\"\n"))
		<-time.After(100 * time.Millisecond)
		_, _ = buf.Write([]byte("time=... level=INFO msg=\"spawned a process\" pid=" + pid + "\n"))
	}()
	if got := spawnedPID(t, buf); got != pid {
		t.Fatalf("spawnedPID = %s, want %s", got, pid)
	}
}

// startHTTP starts 'libos serve --http 127.0.0.1:0' and returns its URL once it listens.
func startHTTP(t *testing.T, args ...string) (url string, cmd *exec.Cmd, stderr *syncBuffer) {
	t.Helper()
	cmd = exec.Command(libosBin, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = testEnv(t)
	pr, pw := io.Pipe()
	stderr = &syncBuffer{}
	cmd.Stderr = io.MultiWriter(pw, stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "libos: listening on "); ok {
				found <- u
			}
		}
	}()
	select {
	case url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve --http did not start:\n%s", stderr.String())
	}
	// Keep draining the pipe so the child never blocks on stderr.
	return url, cmd, stderr
}

// syncBuffer collects a child's output while the child runs; waitFor blocks until a
// pattern appears in it.
type syncBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	written chan struct{} // closed and replaced on every write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

// waitFor returns the first match of re in the buffer, waiting up to timeout for it
// to be written.
func (s *syncBuffer) waitFor(re *regexp.Regexp, timeout time.Duration) ([]string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		m := re.FindStringSubmatch(s.b.String())
		if s.written == nil {
			s.written = make(chan struct{})
		}
		written := s.written
		s.mu.Unlock()
		if m != nil {
			return m, true
		}
		select {
		case <-written:
		case <-deadline.C:
			return nil, false
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	url, cmd, stderr := startHTTP(t, "--data", data)
	c := newClient(t, ctx, &mcp.StreamableClientTransport{Endpoint: url})
	checkEchoPath(t, ctx, c)

	// "Graceful shutdown on SIGTERM loses nothing acknowledged."
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve --http after SIGTERM: %v\n%s", err, stderr.String())
	}
	_ = c.cs.Close()
	pid := spawnedPID(t, stderr)
	r := libos(t, "", "events", pid, "--verify", "--data", data)
	if r.code != 0 || strings.Count(r.stdout, "tool_result") != 2 || strings.Count(r.stdout, "protocol_rejected") != 4 {
		t.Fatalf("events --verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// checkJIT authors the JIT authoring Skill's clock tool over MCP and calls it in the served
// process's projection: "registering a JIT tool sends
// notifications/tools/list_changed"; in direct mode the JIT tool is "its own function
// with its stored input schema"; in multiplexed mode it is reached only through
// run_jit_tool and "a direct call to a registered JIT name is rejected".
func checkJIT(t *testing.T, ctx context.Context, c *mcpClient, projection string) {
	t.Helper()
	cand, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "candidates", "good_clock_now.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.call(ctx, "propose_jit_tool", string(cand))
	if err != nil || res.IsError {
		t.Fatalf("propose_jit_tool: %v %+v", err, res)
	}
	var proposed struct {
		CandidateID string `json:"candidate_id"`
	}
	if err := json.Unmarshal([]byte(textOf(t, res)), &proposed); err != nil || !strings.HasPrefix(proposed.CandidateID, "tcand_") {
		t.Fatalf("propose_jit_tool answered %s", textOf(t, res))
	}
	idArgs := `{"candidate_id":"` + proposed.CandidateID + `"}`
	res, err = c.call(ctx, "validate_jit_tool", idArgs)
	if err != nil || res.IsError || !strings.Contains(textOf(t, res), `"ok":true`) {
		t.Fatalf("validate_jit_tool: %v %+v", err, res)
	}
	for len(c.changed) > 0 {
		<-c.changed
	}
	res, err = c.call(ctx, "register_jit_tool", idArgs)
	if err != nil || res.IsError || !strings.Contains(textOf(t, res), `"scope":"ephemeral_process"`) {
		t.Fatalf("register_jit_tool: %v %+v", err, res)
	}
	select {
	case <-c.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after register_jit_tool")
	}
	names := c.toolNames(t, ctx)
	switch projection {
	case "direct":
		if !contains(names, "clock_now") || contains(names, "run_jit_tool") {
			t.Fatalf("direct projection after registration lists %v", names)
		}
		list, _ := c.cs.ListTools(ctx, nil)
		for _, tool := range list.Tools {
			if tool.Name == "clock_now" {
				schema, _ := json.Marshal(tool.InputSchema)
				if !strings.Contains(string(schema), `"maxLength":64`) || !strings.Contains(string(schema), `"additionalProperties":false`) {
					t.Errorf("clock_now's listed input schema is not its stored schema: %s", schema)
				}
			}
		}
		res, err = c.call(ctx, "clock_now", `{"timezone":"UTC"}`)
	case "multiplexed":
		if contains(names, "clock_now") || !contains(names, "run_jit_tool") {
			t.Fatalf("multiplexed projection after registration lists %v", names)
		}
		direct, err := c.call(ctx, "clock_now", `{"timezone":"UTC"}`)
		if err != nil || !direct.IsError || !strings.HasPrefix(textOf(t, direct), "unknown_tool: ") {
			t.Fatalf("a direct call to the JIT name in multiplexed mode: %v %+v", err, direct)
		}
		res, err = c.call(ctx, "run_jit_tool", `{"tool_name":"clock_now","arguments":{"timezone":"UTC"}}`)
	}
	if err != nil || res.IsError {
		t.Fatalf("calling clock_now (%s): %v %+v", projection, err, res)
	}
	if !regexp.MustCompile(`^\{"iso8601":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\+00:00|Z)","timezone":"UTC"\}$`).MatchString(textOf(t, res)) {
		t.Errorf("clock_now returned %s", textOf(t, res))
	}

	// "the nested arguments are validated against that JIT tool's input schema":
	// rejected before execution, as a tool error with its code.
	bad := `{"timezone":5}`
	name := "clock_now"
	if projection == "multiplexed" {
		name, bad = "run_jit_tool", `{"tool_name":"clock_now","arguments":{"timezone":5}}`
	}
	res, err = c.call(ctx, name, bad)
	if err != nil || !res.IsError || !strings.HasPrefix(textOf(t, res), "schema_invalid: ") || errorCode(t, res) != "schema_invalid" {
		t.Fatalf("schema-invalid call: %v %+v", err, res)
	}
}

func TestServeJIT(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		for _, projection := range []string{"direct", "multiplexed"} {
			t.Run(transport+"/"+projection, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				data := filepath.Join(t.TempDir(), "store")
				var tr mcp.Transport
				var stop func()
				if transport == "stdio" {
					cmd := exec.Command(libosBin, "serve", "--data", data, "--projection", projection)
					cmd.Env = testEnv(t)
					tr = &mcp.CommandTransport{Command: cmd}
				} else {
					url, cmd, _ := startHTTP(t, "--data", data, "--projection", projection)
					tr = &mcp.StreamableClientTransport{Endpoint: url}
					stop = func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
				}
				c := newClient(t, ctx, tr)
				checkJIT(t, ctx, c, projection)
				if stop != nil {
					stop()
				}
				_ = c.cs.Close()
			})
		}
	}
}

// TestServeParamsKeys: "the adapter rejects unknown frame keys", and a tools/call's
// params are part of the frame: params keys other than name, arguments and _meta are a
// protocol-frame failure (a JSON-RPC error with code protocol_frame) and a
// protocol_rejected event, over stdio and over HTTP, not a call with the key dropped.
func TestServeParamsKeys(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	const bogus = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"bogus":1}}`
	type answer struct {
		ID    int `json:"id"`
		Error *struct {
			Code int             `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	check := func(t *testing.T, a answer, data, pid string) {
		t.Helper()
		if a.Error == nil || a.Error.Code != int(jsonrpc.CodeInvalidParams) || !strings.Contains(string(a.Error.Data), `"code":"protocol_frame"`) || !strings.Contains(string(a.Error.Data), "bogus") {
			t.Errorf("tools/call with an unknown params key: %+v", a)
		}
		r := libos(t, "", "events", pid, "--verify", "--data", data)
		if r.code != 0 || strings.Count(r.stdout, "protocol_rejected") != 1 || strings.Contains(r.stdout, "tool_called") {
			t.Errorf("events --verify: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "store")
		cmd := exec.Command(libosBin, "serve", "--data", data)
		cmd.Env = testEnv(t)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Raw lines, as a client that sends keys the Go SDK's client cannot would.
		_, _ = io.WriteString(stdin, initialize+"\n"+initialized+"\n"+bogus+"\n")
		var a answer
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var x answer
			if json.Unmarshal(sc.Bytes(), &x) == nil && x.ID == 2 {
				a = x
				break
			}
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
		check(t, a, data, spawnedPID(t, stderr))
	})

	t.Run("http", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "store")
		url, cmd, stderr := startHTTP(t, "--data", data)
		session := ""
		post := func(msg string) []byte {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(msg))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				session = id
			}
			b, _ := io.ReadAll(resp.Body)
			return b
		}
		post(initialize)
		post(initialized)
		body := post(bogus)
		// The answer is a JSON body, or one server-sent event "data: {...}".
		var a answer
		_ = json.Unmarshal(body, &a)
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				_ = json.Unmarshal([]byte(d), &a)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		check(t, a, data, spawnedPID(t, stderr))
	})
}

// TestServeReusesTheProcess: "if the store holds exactly one live process spawned from
// the same image, serve it (rehydrated, JIT tools back); --new forces a fresh process".
// A client that restarts the server finds its JIT tool; several candidates are named
// and refused rather than guessed.
func TestServeReusesTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	// session runs one 'libos serve' over stdio with args, gives the client to fn and
	// returns the PID served.
	session := func(fn func(c *mcpClient), args ...string) string {
		t.Helper()
		cmd := exec.Command(libosBin, append([]string{"serve", "--data", data}, args...)...)
		cmd.Env = testEnv(t)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		c := newClient(t, ctx, &mcp.CommandTransport{Command: cmd})
		fn(c)
		_ = c.cs.Close()
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Fatalf("serve %v: %v\n%s", args, cmd.ProcessState, stderr.String())
		}
		return spawnedPID(t, stderr)
	}

	first := session(func(c *mcpClient) { checkJIT(t, ctx, c, "direct") })
	again := session(func(c *mcpClient) {
		if names := c.toolNames(t, ctx); !contains(names, "clock_now") {
			t.Errorf("after a restart the tool list is %v: the JIT tool is gone", names)
		}
		res, err := c.call(ctx, "clock_now", `{"timezone":"UTC"}`)
		if err != nil || res.IsError {
			t.Errorf("clock_now after a restart: %v %+v", err, res)
		}
	})
	if again != first {
		t.Fatalf("a restarted serve served %s, not the store's one process %s", again, first)
	}
	if r := libos(t, "", "events", first, "--data", data); !strings.Contains(r.stdout, `"change":"rehydrated"`) {
		t.Errorf("no rehydration of the JIT tool in the reused process's log:\n%s", r.stdout)
	}

	fresh := session(func(c *mcpClient) {
		if names := c.toolNames(t, ctx); contains(names, "clock_now") {
			t.Errorf("a --new process lists %v", names)
		}
	}, "--new")
	if fresh == first {
		t.Fatal("--new served the existing process")
	}

	// Two live processes of the image: serve names both and stops.
	r := libos(t, "", "serve", "--data", data)
	if r.code != exitUsage || !strings.Contains(r.stderr, first) || !strings.Contains(r.stderr, fresh) || !strings.Contains(r.stderr, "--pid") || !strings.Contains(r.stderr, "--new") {
		t.Errorf("serve with two candidates: exit %d\n%s", r.code, r.stderr)
	}
	// Another projection is another image: not a candidate.
	other := session(func(*mcpClient) {}, "--projection", "multiplexed")
	if other == first || other == fresh {
		t.Errorf("serve --projection multiplexed served the direct process %s", other)
	}
	if r := libos(t, "", "serve", "--data", data, "--pid", first, "--new"); r.code != exitUsage {
		t.Errorf("--pid with --new: exit %d %s", r.code, r.stderr)
	}
}
