package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/mcpserver"
)

// sseEvent is one event of a text/event-stream body: its fields by name.
type sseEvent map[string]string

// post sends one JSON-RPC message to url as a client of a session would, and returns
// the response with its body read.
func post(t *testing.T, url, session, version, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	var m struct {
		Method string `json:"method"`
	}
	if version >= "2026-07-28" && json.Unmarshal([]byte(body), &m) == nil {
		req.Header.Set("Mcp-Method", m.Method) // the revision's header beside the body
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// events parses a text/event-stream body into its events, in order.
func events(body string) []sseEvent {
	var out []sseEvent
	for _, block := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		e := sseEvent{}
		for _, line := range strings.Split(block, "\n") {
			name, value, _ := strings.Cut(line, ":")
			e[name] = strings.TrimPrefix(value, " ")
		}
		out = append(out, e)
	}
	return out
}

// session opens a session of revision 2025-11-25 on url and returns its id.
func session(t *testing.T, url string) string {
	t.Helper()
	resp, _ := post(t, url, "", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sse-test","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	if resp, _ := post(t, url, id, "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return id
}

// TestSSEPrimingEvent checks the event stream of a POST in a session of 2025-11-25
// (transports, Sending Messages to the Server, 6): "The server SHOULD immediately
// send an SSE event consisting of an event ID and an empty data field in order to
// prime the client to reconnect (using that event ID as Last-Event-ID)", and "If
// the server does close the connection prior to terminating the SSE stream, it
// SHOULD send an SSE event with a standard retry field": the priming event comes
// first and carries the retry field, and a GET with its ID as Last-Event-ID is
// given the stream's answer again.
func TestSSEPrimingEvent(t *testing.T) {
	_, _, url := served(t, engine.Direct)
	sid := session(t, url)
	resp, body := post(t, url, sid, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("tools/list: Content-Type %q, want an event stream", ct)
	}
	evs := events(body)
	if len(evs) < 2 {
		t.Fatalf("tools/list: %d events, want the priming event and the answer:\n%s", len(evs), body)
	}
	prime := evs[0]
	if prime["id"] == "" || strings.TrimSpace(prime["data"]) != "" {
		t.Fatalf("first event %v: want an event ID and empty data", prime)
	}
	if want := "1000"; prime["retry"] != want || mcpserver.ReconnectDelay.Milliseconds() != 1000 {
		t.Fatalf("priming event retry = %q, want %q (ReconnectDelay %v)", prime["retry"], want, mcpserver.ReconnectDelay)
	}
	answer := evs[len(evs)-1]
	if answer["id"] == "" || !strings.Contains(answer["data"], `"id":2`) || !strings.Contains(answer["data"], `"tools"`) {
		t.Fatalf("last event %v: want the tools/list answer with an event ID", answer)
	}
	for _, e := range evs[1:] {
		if _, ok := e["retry"]; ok {
			t.Fatalf("event %v: only the priming event carries retry", e)
		}
	}

	// Reconnecting with the priming event's ID replays what came after it.
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", prime["id"])
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	b, err := io.ReadAll(got.Body)
	if err != nil {
		t.Fatal(err)
	}
	replay := events(string(b))
	if got.StatusCode != http.StatusOK || len(replay) != 1 || replay[0]["id"] != answer["id"] || replay[0]["data"] != answer["data"] {
		t.Fatalf("GET with Last-Event-ID %q: HTTP %d, events %v; want the answer %v again", prime["id"], got.StatusCode, replay, answer)
	}
}

// TestSSENoPrimingStateless: the revision 2026-07-28 removed resumable streams
// (no Last-Event-ID, SEP-2575), so a stateless request's event stream is not
// primed and carries no event IDs to reconnect with.
func TestSSENoPrimingStateless(t *testing.T) {
	_, _, url := served(t, engine.Direct)
	resp, body := post(t, url, "", "2026-07-28", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"sse-test","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"tools"`) {
		t.Fatalf("tools/list: HTTP %d %s", resp.StatusCode, body)
	}
	for _, e := range events(body) {
		if e["event"] == "prime" || e["retry"] != "" {
			t.Fatalf("stateless stream event %v: want no priming event and no retry", e)
		}
	}
}
