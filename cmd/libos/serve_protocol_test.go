package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The rule these tests check, from the hardening of the server: "one exact parse of
// every incoming message on both transports — trailing bytes, duplicate envelope keys,
// wrong-case members, wrong types of name/params all rejected as typed protocol_frame
// errors (JSON-RPC error with data.code), audited, never dispatched; a bad stdio line
// gets a JSON-RPC error (id null where unknown) and the session goes on; calls in
// flight always answered before exit on SIGTERM/SIGINT/EOF."

const (
	rawInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	rawInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// badMessage is one message the server must refuse, and the id its error must carry:
// "null" where the id cannot be read (the message does not start with one JSON object
// whose only id member is a string or an integer).
type badMessage struct {
	rule, msg, id string
}

func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// badMessages are refused on both transports. Each would reach the SDK's lenient
// decoding otherwise.
var badMessages = []badMessage{
	// Bytes after the message.
	{"trailing bytes after a tools/call", `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo","arguments":{}}} x`, "20"},
	{"trailing bytes hide a duplicated name", `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"echo","name":"propose_jit_tool","arguments":{}}} x`, "21"},
	{"a second message after the first", `{"jsonrpc":"2.0","id":22,"method":"ping"}{"jsonrpc":"2.0","id":23,"method":"ping"}`, "22"},
	// Duplicate keys, in the envelope and in params.
	{"a duplicated params member", `{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"echo","arguments":{}},"params":{"name":"propose_jit_tool","arguments":{}}}`, "24"},
	{"a duplicated method member", `{"jsonrpc":"2.0","id":25,"method":"ping","method":"tools/call","params":{"name":"echo","arguments":{}}}`, "25"},
	{"a duplicated id member", `{"jsonrpc":"2.0","id":26,"id":27,"method":"ping"}`, "null"},
	{"a duplicated name in params", `{"jsonrpc":"2.0","id":28,"method":"tools/call","params":{"name":"echo","name":"propose_jit_tool","arguments":{}}}`, "28"},
	{"an unknown params member", `{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"echo","arguments":{},"bogus":1}}`, "29"},
	// Members of the wrong case.
	{"Method instead of method", `{"jsonrpc":"2.0","id":30,"Method":"tools/call","params":{"name":"echo","arguments":{}}}`, "30"},
	{"Params instead of params", `{"jsonrpc":"2.0","id":31,"method":"tools/call","Params":{"name":"echo","arguments":{}}}`, "31"},
	{"Name instead of name", `{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"Name":"echo","arguments":{}}}`, "32"},
	// Wrong types of name and params.
	{"a name that is a number", `{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":5,"arguments":{}}}`, "33"},
	{"a name that is an array", `{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":["echo"],"arguments":{}}}`, "34"},
	{"a name that is null", `{"jsonrpc":"2.0","id":35,"method":"tools/call","params":{"name":null,"arguments":{}}}`, "35"},
	{"params that are an array", `{"jsonrpc":"2.0","id":36,"method":"tools/call","params":["echo",{}]}`, "36"},
	{"params that are a string", `{"jsonrpc":"2.0","id":37,"method":"tools/call","params":"echo"}`, "37"},
	{"params that are null", `{"jsonrpc":"2.0","id":38,"method":"tools/call","params":null}`, "38"},
	{"params that are a number", `{"jsonrpc":"2.0","id":39,"method":"tools/call","params":5}`, "39"},
	{"params of another method that are an array", `{"jsonrpc":"2.0","id":40,"method":"tools/list","params":[]}`, "40"},
	// Invalid UTF-8 in a name: a raw byte, and a lone surrogate escape.
	{"invalid UTF-8 in a name", "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/call\",\"params\":{\"name\":\"ech\xff\",\"arguments\":{}}}", "41"},
	{"a lone surrogate in a name", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo\udc00","arguments":{}}}`, "42"},
	// What ended a stdio session.
	{"NaN", `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"echo","arguments":{"n":NaN}}}`, "null"},
	{"a raw NUL", "{\"jsonrpc\":\"2.0\",\"id\":44,\"method\":\"ping\"}\x00", "44"},
	{"a NUL inside a string", "{\"jsonrpc\":\"2.0\",\"id\":45,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\x00\"}}", "null"},
	{"a byte-order mark", "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":46,\"method\":\"ping\"}", "null"},
	{"a batch", `[{"jsonrpc":"2.0","id":47,"method":"ping"}]`, "null"},
	{"nesting over 10,000", `{"jsonrpc":"2.0","id":48,"method":"tools/call","params":{"name":"echo","arguments":{"a":` + deep(10001) + `}}}`, "null"},
	{"a scalar", `5`, "null"},
	{"a request without jsonrpc 2.0", `{"id":49,"method":"ping"}`, "49"},
	{"an id that is an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null"},
	{"a fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "null"},
	{"a tools/call without an id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{}}}`, "null"},
}

// rpcAnswer is one JSON-RPC response as the client reads it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

// checkRefused: a refusal is a JSON-RPC error with data.code protocol_frame and the
// id the message had, when it could be read.
func checkRefused(t *testing.T, b badMessage, a rpcAnswer) {
	t.Helper()
	if a.Error == nil || a.Error.Data.Code != "protocol_frame" || string(a.ID) != b.id {
		t.Errorf("%s: want a JSON-RPC error with data.code protocol_frame and id %s, got id %s result %s error %+v", b.rule, b.id, a.ID, a.Result, a.Error)
	}
}

// eventCounts are the counts of each event type in pid's verified log.
func eventCounts(t *testing.T, data, pid string) map[string]int {
	t.Helper()
	r := libos(t, "", "events", pid, "--verify", "--json", "--data", data)
	if r.code != 0 {
		t.Fatalf("events --verify: %d %s", r.code, r.stderr)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil {
			counts[ev.Type]++
		}
	}
	return counts
}

// stdioServer is 'libos serve' on pipes.
type stdioServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
	data   string
}

func startStdio(t *testing.T) *stdioServer {
	t.Helper()
	s := &stdioServer{data: filepath.Join(t.TempDir(), "store"), stderr: &syncBuffer{}}
	s.cmd = exec.Command(libosBin, "serve", "--data", s.data)
	s.cmd.Env = testEnv(t)
	s.stdin, _ = s.cmd.StdinPipe()
	stdout, _ := s.cmd.StdoutPipe()
	s.out = bufio.NewReaderSize(stdout, 1<<20)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

func (s *stdioServer) send(t *testing.T, lines ...string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, strings.Join(lines, "\n")+"\n"); err != nil {
		t.Fatal(err)
	}
}

// next is the next answer on stdout (notifications skipped); ok is false at the end.
func (s *stdioServer) next(t *testing.T) (rpcAnswer, bool) {
	t.Helper()
	for {
		line, err := s.out.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var a rpcAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				t.Fatalf("stdout is not JSON-RPC: %q: %v", line, err)
			}
			if len(a.ID) > 0 {
				return a, true
			}
		}
		if err != nil {
			return rpcAnswer{}, false
		}
	}
}

// TestServeStdioRefusesBadLines: every bad line is answered with a protocol_frame
// error, recorded as protocol_rejected, never dispatched, and the session goes on.
func TestServeStdioRefusesBadLines(t *testing.T) {
	s := startStdio(t)
	s.send(t, rawInitialize, rawInitialized)
	if a, ok := s.next(t); !ok || a.Error != nil {
		t.Fatalf("initialize: %+v\n%s", a, s.stderr.String())
	}
	bad := append([]badMessage{}, badMessages...)
	// A line over the 16 MiB message limit.
	bad = append(bad, badMessage{"a line over 16 MiB", `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"echo","arguments":{"s":"` + strings.Repeat("x", 16<<20) + `"}}}`, "null"})
	for _, b := range bad {
		s.send(t, b.msg)
		a, ok := s.next(t)
		if !ok {
			t.Fatalf("%s: serve ended the session:\n%s", b.rule, s.stderr.String())
		}
		checkRefused(t, b, a)
	}
	// The session goes on: a well-formed call after all of them runs.
	s.send(t, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo","arguments":{"after":true}}}`)
	if a, ok := s.next(t); !ok || a.Error != nil || string(a.ID) != "99" || !strings.Contains(string(a.Result), `after`) {
		t.Fatalf("the call after the bad lines: %+v\n%s", a, s.stderr.String())
	}
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after stdin closed: %v\n%s", err, s.stderr.String())
	}
	counts := eventCounts(t, s.data, spawnedPID(t, s.stderr))
	if counts["protocol_rejected"] != len(bad) || counts["tool_called"] != 1 || counts["call_rejected"] != 0 {
		t.Errorf("events %v: want %d protocol_rejected, one tool_called (the call after them), no call_rejected", counts, len(bad))
	}
}

// TestServeHTTPRefusesBadBodies: the same messages as POST bodies.
func TestServeHTTPRefusesBadBodies(t *testing.T) {
	data := filepath.Join(t.TempDir(), "store")
	url, cmd, stderr := startHTTP(t, "--data", data)
	session := ""
	post := func(msg string) (int, rpcAnswer) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
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
		// The answer is a JSON body, or one server-sent event "data: {...}".
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(d)
			}
		}
		var a rpcAnswer
		_ = json.Unmarshal(b, &a)
		return resp.StatusCode, a
	}
	post(rawInitialize)
	post(rawInitialized)
	bad := append([]badMessage{}, badMessages...)
	bad = append(bad, badMessage{"a body over 16 MiB", `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"echo","arguments":{"s":"` + strings.Repeat("x", 16<<20) + `"}}}`, "null"})
	for _, b := range bad {
		status, a := post(b.msg)
		want := http.StatusOK // a JSON-RPC error answering the request
		switch {
		case strings.Contains(b.rule, "16 MiB"):
			want = http.StatusRequestEntityTooLarge
		case b.id == "null":
			want = http.StatusBadRequest
		}
		if status != want {
			t.Errorf("%s: HTTP %d, want %d", b.rule, status, want)
		}
		checkRefused(t, b, a)
	}
	if _, a := post(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo","arguments":{"after":true}}}`); a.Error != nil || !strings.Contains(string(a.Result), "after") {
		t.Fatalf("the call after the bad bodies: %+v", a)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	counts := eventCounts(t, data, spawnedPID(t, stderr))
	if counts["protocol_rejected"] != len(bad) || counts["tool_called"] != 1 || counts["call_rejected"] != 0 {
		t.Errorf("events %v: want %d protocol_rejected, one tool_called (the call after them), no call_rejected", counts, len(bad))
	}
}

// TestServeStdioAnswersEveryCallBeforeExit: calls sent together are answered before
// serve exits, whether the input ends or SIGTERM or SIGINT arrives while they run:
// every call the log shows as run has its answer on stdout, no id is answered twice,
// and after the end of input every call ran.
func TestServeStdioAnswersEveryCallBeforeExit(t *testing.T) {
	const calls = 8
	for _, stop := range []string{"EOF", "SIGTERM", "SIGINT"} {
		for trial := range 3 {
			t.Run(fmt.Sprintf("%s/%d", stop, trial), func(t *testing.T) {
				s := startStdio(t)
				s.send(t, rawInitialize, rawInitialized)
				if _, ok := s.next(t); !ok {
					t.Fatalf("initialize:\n%s", s.stderr.String())
				}
				var batch []string
				for i := range calls {
					batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"i":%d}}}`, 100+i, i))
				}
				s.send(t, batch...)
				// The calls are being read; the stop comes while they run.
				first, answered := s.next(t)
				if !answered {
					t.Fatalf("no answer:\n%s", s.stderr.String())
				}
				switch stop {
				case "EOF":
					s.stdin.Close()
				case "SIGTERM":
					_ = s.cmd.Process.Signal(syscall.SIGTERM)
				case "SIGINT":
					_ = s.cmd.Process.Signal(syscall.SIGINT)
				}
				ok, failed := 0, 0
				seen := map[string]bool{string(first.ID): true}
				if first.Error == nil {
					ok++
				} else {
					failed++
				}
				for {
					a, more := s.next(t)
					if !more {
						break
					}
					if seen[string(a.ID)] {
						t.Errorf("id %s answered twice", a.ID)
					}
					seen[string(a.ID)] = true
					if a.Error == nil {
						ok++
					} else {
						failed++
					}
				}
				if err := s.cmd.Wait(); err != nil {
					t.Fatalf("serve: %v\n%s", err, s.stderr.String())
				}
				if stop == "EOF" && ok+failed != calls {
					t.Errorf("%d of %d calls answered (%d results, %d errors)", ok+failed, calls, ok, failed)
				}
				if stop == "EOF" && ok != calls {
					t.Errorf("after the end of input %d of %d calls ran", ok, calls)
				}
				counts := eventCounts(t, s.data, spawnedPID(t, s.stderr))
				if counts["tool_result"] != ok {
					t.Errorf("the log has %d results, the client got %d", counts["tool_result"], ok)
				}
			})
		}
	}
}
