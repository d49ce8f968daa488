package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestStdioUnencodableAnswer: "the stdio writer answers an unencodable reply with
// -32603 rather than ending the session". An answer the SDK hands the transport that
// is not JSON (a result, or an error's data) goes out as a JSON-RPC error for its
// request, and the write succeeds: an error from Write would end the session.
func TestStdioUnencodableAnswer(t *testing.T) {
	s, _, _, _ := bridge(t)
	var out bytes.Buffer
	c := s.newStdioConn(strings.NewReader(""), &out, DefaultMaxLineBytes)
	id, _ := jsonrpc.MakeID("q")
	for _, msg := range []*jsonrpc.Response{
		{ID: id, Result: json.RawMessage(`{"uri":"\x00"}`)},
		{ID: id, Error: &jsonrpc.Error{Code: -32602, Message: "Resource not found", Data: json.RawMessage(`{"uri":"\x00"}`)}},
	} {
		out.Reset()
		if err := c.Write(context.Background(), msg); err != nil {
			t.Fatalf("Write: %v", err)
		}
		var r rpcResponse
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("the line written is not JSON: %q", out.Bytes())
		}
		if string(r.ID) != `"q"` || r.Error == nil || (msg.Error == nil && r.Error.Code != -32603) || (msg.Error != nil && r.Error.Code != -32602) {
			t.Fatalf("answer %s %+v", r.ID, r.Error)
		}
	}
}
