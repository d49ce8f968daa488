package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
)

// The fuzz targets check the rule of both transports for any input: "one exact parse
// of every incoming message — rejected as typed protocol_frame errors (JSON-RPC error
// with data.code), audited, never dispatched; a bad stdio line gets a JSON-RPC error
// (id null where unknown) and the session goes on". Their seed corpora
// (testdata/fuzz/Fuzz*) hold the shapes that once got past the SDK's decoding or
// ended a session: bytes after the message, duplicate and wrong-case members, params
// and names of the wrong type, invalid UTF-8, NaN, NUL, a byte-order mark, batches,
// deep nesting.

// probe is the request sent after the fuzzed input: its answer shows the session
// went on.
const probe = `{"jsonrpc":"2.0","id":"libos-probe","method":"ping"}`

// mark is where pid's log ends now; eventsSince counts the events of type typ
// written after it. Counting only the new events keeps every fuzz execution as cheap
// as the first, however long the log has grown.
func mark(t testing.TB, st *store.Store, pid string) uint64 {
	h, err := st.Head(pid)
	if err != nil {
		t.Fatal(err)
	}
	return h.Seq
}

func eventsSince(t testing.TB, st *store.Store, pid string, after uint64, typ string) int {
	n := 0
	for {
		evs, err := st.Events(pid, after, store.MaxPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == typ {
				n++
			}
			after = ev.Seq
		}
		if len(evs) < store.MaxPage {
			return n
		}
	}
}

// refusal reports whether line is an answer of the gate: an error whose data holds
// the code protocol_frame.
func refusal(t testing.TB, line []byte) (rpcResponse, bool) {
	var r rpcResponse
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("the server wrote a line that is not JSON: %q", line)
	}
	if r.Error == nil {
		return r, false
	}
	var data struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Error.Data, &data)
	return r, data.Code == string(engine.CodeProtocolFrame)
}

func FuzzStdio(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}} x`))
	s, _, st, pid := bridge(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		before := mark(t, st, pid)
		var out bytes.Buffer
		input := append(append(append([]byte{}, in...), '\n'), probe+"\n"...)
		if err := s.Stdio(context.Background(), bytes.NewReader(input), &out); err != nil {
			t.Fatalf("the session ended with %v", err)
		}
		refused, probed := 0, false
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			r, ok := refusal(t, sc.Bytes())
			if ok {
				refused++
			}
			if string(r.ID) == `"libos-probe"` {
				probed = r.Error == nil
			}
		}
		if !probed {
			t.Fatalf("the session did not go on to answer the probe:\n%s", out.String())
		}
		if got := eventsSince(t, st, pid, before, engine.EventProtocolRejected); got != refused {
			t.Fatalf("%d refusals answered, %d protocol_rejected events recorded", refused, got)
		}
	})
}

func FuzzHTTP(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}} x`))
	s, _, st, pid := bridge(f)
	h := s.Handler(&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	post := func(body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := mark(t, st, pid)
		w := post(body)
		if w.Code >= 500 {
			t.Fatalf("HTTP %d: %s", w.Code, w.Body)
		}
		rejected := eventsSince(t, st, pid, before, engine.EventProtocolRejected)
		if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && w.Body.Len() > 0 {
			if _, refused := refusal(t, bytes.TrimSpace(w.Body.Bytes())); refused {
				if rejected != 1 {
					t.Fatalf("a refusal without its protocol_rejected event: %s", w.Body)
				}
				if eventsSince(t, st, pid, before, engine.EventToolCalled) != 0 {
					t.Fatalf("a refused message was dispatched: %q", body)
				}
			}
		}
		if w := post([]byte(probe)); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"libos-probe"`) {
			t.Fatalf("the probe after the body: HTTP %d %s", w.Code, w.Body)
		}
	})
}
