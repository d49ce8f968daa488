package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
)

// Every message a client sends, on either transport, is parsed exactly once here
// before the SDK sees it. The SDK's own decoding is lenient where the libOS must not
// be: the last of a duplicated key wins, a member named "Method" is not a method (so
// the message is taken for a response and never answered), bytes after the message
// are ignored on HTTP and end the whole session on stdio, and a params value of the
// wrong type is refused with an error that carries no code and leaves no trace. A
// message that fails the check is never dispatched: the client gets a JSON-RPC error
// whose data holds the code protocol_frame, and the process's audit log gets a
// protocol_rejected event. A message that passes is handed to the SDK byte for byte,
// and the SDK's decoding of it cannot differ from this one.

// MaxMessageDepth bounds the nesting of one message. The adapter bounds arguments
// more tightly (engine.Limits.MaxDepth); this bound keeps the transport's parse,
// and the SDK's after it, from following a hostile nesting.
const MaxMessageDepth = 1000

// maxSafeID is the largest integer id the SDK carries exactly: it decodes ids as
// float64, so a larger integer would come back in the response as another number.
const maxSafeID = 1<<53 - 1

// Methods whose params members are fixed: a member not listed is refused, since the
// SDK would drop it and the adapter would never see it.
var exactParams = map[string][]string{
	"tools/call": {"name", "arguments", "_meta"},
}

// statelessParams are the params members the stateless revision adds to a method
// with fixed params: the answers to an input_required result and its opaque state.
var statelessParams = map[string][]string{
	"tools/call": {"inputResponses", "requestState"},
}

// message is a message that passed the check.
type message struct {
	msg    jsonrpc.Message
	method string // "" for a response
	id     string // idKey of the id; "" for a notification
	// version is the protocol revision a request of the stateless revision
	// (2026-07-28 and later) names in params._meta; "" for the handshake revisions.
	version string
}

// rejection is a message refused by the check.
type rejection struct {
	id     json.RawMessage // the message's id when it could be read; nil answers with null
	code   int64           // JSON-RPC error code
	reason string
}

func reject(id json.RawMessage, code int64, format string, args ...any) *rejection {
	return &rejection{id: id, code: code, reason: "mcp: " + fmt.Sprintf(format, args...)}
}

// envelopeKeys are the members of a JSON-RPC 2.0 message.
var envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// checkMessage parses raw, one JSON-RPC message, exactly: one JSON value and nothing
// after it but white space, valid UTF-8 (no lone surrogate escapes), no duplicate key
// at any depth, nesting within MaxMessageDepth, a single object (no batch: MCP removed
// batching in 2025-06-18), members of JSON-RPC 2.0 only and in their exact case, an
// id that is a string or an integer the SDK carries exactly, params that are an
// object, for methods with fixed params (tools/call) exactly those members with
// the types MCP gives them, and for logging/setLevel a level MCP names.
func checkMessage(raw []byte) (*message, *rejection) {
	v, err := jsonexact.DecodeAny(raw, MaxMessageDepth)
	if err != nil {
		id, inParams := recoverEnvelope(raw)
		code := int64(jsonrpc.CodeParseError)
		if inParams {
			code = jsonrpc.CodeInvalidParams
		}
		return nil, reject(id, code, "the message is not exact JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if _, batch := v.([]any); batch {
			return nil, reject(nil, jsonrpc.CodeInvalidRequest, "a batch is not a message: MCP sends one JSON-RPC message at a time")
		}
		return nil, reject(nil, jsonrpc.CodeInvalidRequest, "a message must be a JSON object, got %s", jsonexact.KindOf(v))
	}
	// The id first, so that every later refusal answers the request it refuses.
	var id json.RawMessage
	idKey := ""
	if iv, ok := obj["id"]; ok {
		switch x := iv.(type) {
		case string:
			id, _ = json.Marshal(x)
			idKey = "s" + x
		case json.Number:
			n, err := strconv.ParseInt(string(x), 10, 64)
			if err != nil || n > maxSafeID || n < -maxSafeID {
				return nil, reject(nil, jsonrpc.CodeInvalidRequest, "id %s is not a string or an integer within ±(2^53-1)", x)
			}
			id = json.RawMessage(x)
			idKey = "n" + strconv.FormatInt(n, 10)
		default:
			return nil, reject(nil, jsonrpc.CodeInvalidRequest, "id must be a string or an integer, got %s", jsonexact.KindOf(iv))
		}
	}
	for k := range obj {
		if contains(envelopeKeys, k) {
			continue
		}
		for _, want := range envelopeKeys {
			if strings.EqualFold(k, want) {
				return nil, reject(id, jsonrpc.CodeInvalidRequest, "member %q is not %q: JSON-RPC member names are case-sensitive", k, want)
			}
		}
		return nil, reject(id, jsonrpc.CodeInvalidRequest, "unexpected member %q in a JSON-RPC message", k)
	}
	if vs, ok := obj["jsonrpc"].(string); !ok || vs != "2.0" {
		return nil, reject(id, jsonrpc.CodeInvalidRequest, `a JSON-RPC 2.0 message needs "jsonrpc": "2.0"`)
	}
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	mv, hasMethod := obj["method"]
	if !hasMethod {
		// A response to a request of the server (elicitation, roots, sampling).
		switch {
		case idKey == "":
			return nil, reject(nil, jsonrpc.CodeInvalidRequest, "a message without a method is a response and needs an id")
		case hasResult == hasError:
			return nil, reject(id, jsonrpc.CodeInvalidRequest, "a response carries exactly one of result and error")
		case obj["params"] != nil:
			return nil, reject(id, jsonrpc.CodeInvalidRequest, "a response carries no params")
		}
		if hasError {
			e, ok := obj["error"].(map[string]any)
			if !ok {
				return nil, reject(id, jsonrpc.CodeInvalidRequest, "error must be an object")
			}
			if c, ok := e["code"].(json.Number); !ok || !isInt(c) {
				return nil, reject(id, jsonrpc.CodeInvalidRequest, "error.code must be an integer")
			}
			if _, ok := e["message"].(string); !ok {
				return nil, reject(id, jsonrpc.CodeInvalidRequest, "error.message must be a string")
			}
		}
		return decoded(raw, "", idKey, id)
	}
	method, ok := mv.(string)
	if !ok || method == "" {
		return nil, reject(id, jsonrpc.CodeInvalidRequest, "method must be a non-empty string")
	}
	if hasResult || hasError {
		return nil, reject(id, jsonrpc.CodeInvalidRequest, "a request carries no result or error")
	}
	pv, hasParams := obj["params"]
	params, isObj := pv.(map[string]any)
	if hasParams && !isObj {
		return nil, reject(id, jsonrpc.CodeInvalidParams, "params of %s must be an object, got %s", method, jsonexact.KindOf(pv))
	}
	version := ""
	if m, ok := params["_meta"]; ok {
		meta, ok := m.(map[string]any)
		if !ok {
			return nil, reject(id, jsonrpc.CodeInvalidParams, "params._meta of %s must be an object, got %s", method, jsonexact.KindOf(m))
		}
		if v, ok := meta[mcp.MetaKeyProtocolVersion]; ok {
			if version, ok = v.(string); !ok {
				return nil, reject(id, jsonrpc.CodeInvalidParams, "params._meta[%q] of %s must be a string, got %s", mcp.MetaKeyProtocolVersion, method, jsonexact.KindOf(v))
			}
		}
	}
	keys, fixed := exactParams[method]
	if fixed && version >= statelessRevision {
		keys = append(slices.Clip(keys), statelessParams[method]...)
	}
	if fixed {
		if !hasParams {
			return nil, reject(id, jsonrpc.CodeInvalidParams, "%s needs params", method)
		}
		for k := range params {
			if contains(keys, k) {
				continue
			}
			for _, want := range keys {
				if strings.EqualFold(k, want) {
					return nil, reject(id, jsonrpc.CodeInvalidParams, "params member %q of %s is not %q: member names are case-sensitive", k, method, want)
				}
			}
			return nil, reject(id, jsonrpc.CodeInvalidParams, "unexpected params member %q of %s (it holds %s)", k, method, strings.Join(keys, ", "))
		}
	}
	if method == "tools/call" {
		if idKey == "" {
			return nil, reject(nil, jsonrpc.CodeInvalidRequest, "tools/call is a request and needs an id")
		}
		if v, ok := params["inputResponses"]; ok {
			if _, ok := v.(map[string]any); !ok {
				return nil, reject(id, jsonrpc.CodeInvalidParams, "params.inputResponses of tools/call must be an object, got %s", jsonexact.KindOf(v))
			}
		}
		if v, ok := params["requestState"]; ok {
			if _, ok := v.(string); !ok {
				return nil, reject(id, jsonrpc.CodeInvalidParams, "params.requestState of tools/call must be a string, got %s", jsonexact.KindOf(v))
			}
		}
		// A missing name is left to the adapter, which may fall back on a legacy
		// action argument; so is a null one, which the adapter reads as missing (as
		// in every other frame it accepts). A name of any other type must be a string.
		if n, ok := params["name"]; ok && n != nil {
			if _, ok := n.(string); !ok {
				return nil, reject(id, jsonrpc.CodeInvalidParams, "params.name of tools/call must be a string, got %s", jsonexact.KindOf(n))
			}
		}
	}
	if method == "initialize" && hasParams {
		// The SDK decodes initialize's params into its Go types before any handler of
		// ours runs, and answers a member of the wrong type with code 0 over HTTP. They
		// are decoded here the same way first, so that such params are invalid params on
		// every transport.
		if r := checkShape(id, method, pv, new(mcp.InitializeParams)); r != nil {
			return nil, r
		}
	}
	if method == "logging/setLevel" && version == "" {
		// The SDK takes any string for a level and drops the messages it cannot rank.
		if !hasParams {
			return nil, reject(id, jsonrpc.CodeInvalidParams, "%s needs params", method)
		}
		lv, ok := params["level"].(string)
		if !ok || !contains(logLevels, lv) {
			return nil, reject(id, jsonrpc.CodeInvalidParams, "params.level of %s must be one of %s, got %s", method, strings.Join(logLevels, ", "), levelOf(params))
		}
	}
	m, r := decoded(raw, method, idKey, id)
	if m != nil {
		m.version = version
	}
	return m, r
}

// checkShape decodes params into into, as the SDK will, and refuses them as invalid
// params when a member has the wrong type, naming the member.
func checkShape(id json.RawMessage, method string, params any, into any) *rejection {
	b, err := json.Marshal(params)
	if err == nil {
		err = json.Unmarshal(b, into)
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return reject(id, jsonrpc.CodeInvalidParams, "params.%s of %s must be %s, got %s", te.Field, method, jsonKind(te.Type), te.Value)
	}
	return reject(id, jsonrpc.CodeInvalidParams, "params of %s do not have the types MCP gives them", method)
}

// jsonKind names the JSON kind a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// logLevels are the levels of logging/setLevel, the syslog severities of RFC 5424
// as MCP names them, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// levelOf describes the level params holds, for a refusal.
func levelOf(params map[string]any) string {
	v, ok := params["level"]
	if !ok {
		return "no level"
	}
	if s, ok := v.(string); ok {
		q, _ := json.Marshal(s)
		return string(q)
	}
	return jsonexact.KindOf(v)
}

// outOfOrder is the refusal of a request of the handshake revisions that comes out
// of the order MCP's lifecycle gives, in a session that is initialized or not: an
// initialize once the session is, or a request other than initialize and ping
// before it. (The SDK answers both with code 0.) nil when m is in order.
func outOfOrder(m *message, initialized bool) *rejection {
	req, ok := m.msg.(*jsonrpc.Request)
	if !ok || m.id == "" || m.version != "" || m.method == "server/discover" {
		return nil
	}
	id, _ := json.Marshal(req.ID.Raw())
	switch {
	case m.method == "initialize" && initialized:
		return reject(id, jsonrpc.CodeInvalidRequest, "the session is already initialized: initialize comes once")
	case m.method != "initialize" && m.method != "ping" && !initialized:
		return reject(id, jsonrpc.CodeInvalidRequest, "%q before initialize: a session starts with initialize", m.method)
	}
	return nil
}

// handshake follows the lifecycle of one session for a transport that sees all its
// messages (stdio, Wrap).
type handshake struct {
	mu          sync.Mutex
	initialized bool   // an initialize was passed on, and did not fail
	initID      string // the id of that initialize until it is answered
}

// check refuses m when it comes out of order, and notes an initialize passed on:
// the SDK handles an initialize before any request after it.
func (h *handshake) check(m *message) *rejection {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := outOfOrder(m, h.initialized)
	if r == nil && m.method == "initialize" && m.id != "" && m.version == "" {
		h.initialized, h.initID = true, m.id
	}
	return r
}

// answered notes an answer of the server: a failed initialize leaves the session
// uninitialized.
func (h *handshake) answered(msg jsonrpc.Message) {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.initID != "" && keyOf(r.ID) == h.initID {
		h.initialized = r.Error == nil
		h.initID = ""
	}
}

// recoverEnvelope reads what it can of a message that is not exact JSON, so that the
// refusal answers the request it refuses: the id, when the message starts with one
// JSON object (its syntax checked, not its exactness) whose only id member is a string
// or a safe integer; and whether the fault lies in params alone (the envelope is
// exact, nothing follows it), which makes it an invalid-params error as the adapter's
// refusals are. A message whose id cannot be read this way is answered with id null.
func recoverEnvelope(raw []byte) (id json.RawMessage, inParams bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	members := map[string][]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		k, _ := t.(string)
		members[k] = append(members[k], v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if ids := members["id"]; len(ids) == 1 {
		switch x, _ := jsonexact.DecodeAny(ids[0], 1); x := x.(type) {
		case string:
			id, _ = json.Marshal(x)
		case json.Number:
			if n, err := strconv.ParseInt(string(x), 10, 64); err == nil && n <= maxSafeID && n >= -maxSafeID {
				id = json.RawMessage(x)
			}
		}
	}
	if id == nil || len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return id, false
	}
	for k, vs := range members {
		if !contains(envelopeKeys, k) || len(vs) != 1 {
			return id, false
		}
		if _, err := jsonexact.DecodeAny(vs[0], MaxMessageDepth); err != nil && k != "params" {
			return id, false
		}
	}
	return id, true
}

// decoded hands the checked message to the SDK's decoder, which can no longer read
// it differently.
func decoded(raw []byte, method, idKey string, id json.RawMessage) (*message, *rejection) {
	m, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return nil, reject(id, jsonrpc.CodeInvalidRequest, "%v", err)
	}
	return &message{msg: m, method: method, id: idKey}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isInt(n json.Number) bool {
	_, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil
}

// keyOf is the idKey of an id the SDK writes.
func keyOf(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return "s" + v
	case int64:
		return "n" + strconv.FormatInt(v, 10)
	}
	return ""
}

// refuse records the refusal of raw in the process's audit log and returns the
// JSON-RPC error response to send: the error's data is the typed error (code
// protocol_frame, or storage_failed when the refusal could not be recorded).
func (s *Server) refuse(ctx context.Context, raw []byte, r *rejection) []byte {
	err := s.k.RejectFrame(ctx, s.pid, raw, r.reason)
	code := string(liberr.CodeOr(err, liberr.CodeToolFailed))
	te := ToolError{Code: code, Message: r.reason}
	rpcCode := r.code
	var e *engine.Error
	if errors.As(err, &e) && engine.Code(code) != engine.CodeProtocolFrame {
		te.Message = e.Message
		rpcCode = jsonrpc.CodeInternalError
		s.log.Error("mcp: a refused message could not be recorded", "pid", s.pid, "err", err)
	}
	return errorResponse(r.id, rpcCode, te)
}

// errorResponse is a JSON-RPC error response; a nil id is null.
func errorResponse(id json.RawMessage, code int64, te ToolError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	data, _ := json.Marshal(te)
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}{code, te.Code + ": " + te.Message, data}})
	return out
}
