package mcpserver

import (
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every error the server answers with is a JSON-RPC error that can be written: a
// code that JSON-RPC (or MCP) gives, never 0, and data that is valid JSON or absent.
// The SDK guarantees neither. It answers an error that carries no code with code 0,
// and it writes the URI of a resource it cannot find into the error's data with Go's
// %q, which is not JSON for a URI holding a control character or invalid UTF-8: its
// encoder then fails on the answer and it ends the whole session, the request
// unanswered. So the errors of every handler are made writable where they leave the
// handler (intercept), and every response this package's transports write is made
// writable again (for the errors the SDK makes before any handler runs); an answer
// that still cannot be encoded becomes an internal error for its request.

// wireError is err as a JSON-RPC error that can be written: its code, or internal
// error when it has none; its message; its data when that is JSON, else the data as
// a JSON string.
func wireError(err error) *jsonrpc.Error {
	out := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		if je.Code != 0 {
			out.Code = je.Code
		}
		out.Data = je.Data
	}
	if len(out.Data) > 0 && !json.Valid(out.Data) {
		out.Data, _ = json.Marshal(string(out.Data))
	}
	return out
}

// resourceNotFound is the error of a resources/read of uri that nothing serves, as
// MCP has it (invalid params, the URI in data), with data that is JSON whatever the
// URI holds.
func resourceNotFound(uri string) error {
	data, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "Resource not found", Data: data}
}

// sameError reports whether err is the JSON-RPC error want: the same code, message
// and data. (errors.Is compares JSON-RPC errors by their code alone.)
func sameError(err, want error) bool {
	var a, b *jsonrpc.Error
	return errors.As(err, &a) && errors.As(want, &b) && a.Code == b.Code && a.Message == b.Message && string(a.Data) == string(b.Data)
}

// wireMessage is msg with its error, if it is a response with one, made writable.
func wireMessage(msg jsonrpc.Message) jsonrpc.Message {
	r, ok := msg.(*jsonrpc.Response)
	if !ok || r.Error == nil {
		return msg
	}
	out := *r
	out.Error = wireError(r.Error)
	return &out
}

// encodeAnswer encodes msg for the wire. A response that cannot be encoded is
// replaced by an internal error for its request, so that the request is answered
// and the session goes on; any other message that cannot be encoded is an error.
func encodeAnswer(msg jsonrpc.Message) ([]byte, error) {
	msg = wireMessage(msg)
	data, err := jsonrpc.EncodeMessage(msg)
	if err == nil {
		return data, nil
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeInternalError, Message: "mcp: the answer could not be encoded: " + err.Error()}})
}
