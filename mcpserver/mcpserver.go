package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/liberr"
)

// Server is one process served over MCP. Create it with New and close it with Close.
type Server struct {
	k   *engine.Kernel
	pid string
	log *slog.Logger
	srv *mcp.Server

	mu       sync.Mutex
	mirrored map[string]string // tool name → its rendered MCP definition
	unsub    func()
	hmacKey  []byte // authenticates requestState (approval.go), read from the store once

	// inflight are the cancels of the stateless calls in flight, by id (http.go).
	callMu   sync.Mutex
	inflight map[string][]*callSlot
	slots    map[string]*callSlot
	// sessionIDs are the ids of the requests in flight in each HTTP session, as
	// session id + NUL + request id (http.go's holdID).
	sessionIDs map[string]struct{}

	// resMu guards what syncResources last served (resources.go).
	resMu     sync.Mutex
	resSynced bool
	resHidden bool

	// posts counts the HTTP POSTs in flight (see Handler and Wait).
	posts sync.WaitGroup

	authState // auth.go
}

// Options configure New.
type Options struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// Instructions are sent to clients at initialisation.
	Instructions string
	// Logger receives the SDK's and the bridge's logs; nil discards them.
	Logger *slog.Logger
	// Auth, when set, admits to the HTTP handler only the requests whose bearer
	// token covers the process (auth.go); nil serves every request, for loopback.
	Auth *Authorizer
}

// New serves process pid of k. The tool list is read from the kernel now and again on
// every change the kernel reports.
func New(k *engine.Kernel, pid string, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{k: k, pid: pid, log: log, mirrored: map[string]string{}}
	s.auth = opts.Auth
	s.srv = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Instructions:      opts.Instructions,
		Logger:            log,
		CompletionHandler: s.complete,
		// The tools capability is stated even while the projection is empty, with
		// list_changed: registering a JIT tool changes the list.
		// Prompts are stated too: the SDK answers prompts/list (with an empty list),
		// and a server that answers a method declares its capability.
		// Resources and the Skills extension: the audit log, the candidates and the
		// image's Skills (resources.go). Completions: of the resource templates'
		// variables (completion.go).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Prompts: &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{ListChanged: true}, Extensions: map[string]any{skillsExtension: map[string]any{}},
			Completions: &mcp.CompletionCapabilities{}},
	})
	s.srv.AddReceivingMiddleware(s.intercept)
	if err := s.sync(false); err != nil {
		return nil, err
	}
	if err := s.addSkills(); err != nil {
		return nil, err
	}
	s.syncResources()
	s.unsub = k.OnToolsChanged(func(changed string) {
		if changed != pid {
			return
		}
		if err := s.sync(true); err != nil {
			s.log.Error("mcp: could not refresh the tool list", "pid", pid, "err", err)
		}
		s.syncResources()
	})
	return s, nil
}

// MCP is the SDK server. Serve it through Stdio, Transport or Handler: other
// transports skip the exact check of every message (see gate.go).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Close stops following the kernel's tool changes and records the access
// decisions counted and not recorded yet (FlushAccess). It does not close sessions.
func (s *Server) Close() {
	if s.unsub != nil {
		s.unsub()
	}
	s.FlushAccess(context.Background())
}

// sync makes the SDK's registry equal to the projection: tools added or changed are
// (re)added, tools gone are removed. The SDK sends list_changed for each change,
// debounced. With always, a change the kernel reported that leaves the rendered list
// as it was (a JIT tool registered under the multiplexed projection, which hides it)
// is still announced: the kernel decides what a change is, and a client that lists
// again simply finds the same list.
func (s *Server) sync(always bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defs, err := s.k.Tools(s.pid)
	if err != nil {
		return err
	}
	rendered, err := render.Tools(defs, render.MCP)
	if err != nil {
		return err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rendered, &items); err != nil {
		return fmt.Errorf("mcp: decode the rendered tool list: %w", err)
	}
	if len(items) != len(defs) {
		return fmt.Errorf("mcp: the rendered tool list has %d entries for %d tools", len(items), len(defs))
	}
	seen := map[string]bool{}
	changed := false
	var first *mcp.Tool
	for i, raw := range items {
		d := defs[i]
		seen[d.Name] = true
		var t mcp.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("mcp: decode the rendering of %s: %w", d.Name, err)
		}
		// The schemas go out as the engine's MCP rendering wrote them, byte for byte:
		// decoding them into Go values would round numbers through float64, and the
		// rendering is what MCP clients accept (an outputSchema whose root is not an
		// object is left out there, for instance).
		var schemas struct {
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &schemas); err != nil {
			return fmt.Errorf("mcp: decode the schemas of %s: %w", d.Name, err)
		}
		t.InputSchema = schemas.InputSchema
		t.OutputSchema = nil
		if len(schemas.OutputSchema) > 0 {
			t.OutputSchema = schemas.OutputSchema
		}
		if first == nil {
			first = &t
		}
		if s.mirrored[d.Name] == string(raw) {
			continue
		}
		s.addTool(&t)
		s.mirrored[d.Name] = string(raw)
		changed = true
	}
	var gone []string
	for name := range s.mirrored {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		s.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(s.mirrored, n)
		}
		changed = true
	}
	if always && !changed && first != nil {
		// Adding a tool again, unchanged, is how the SDK is told to announce a change.
		s.addTool(first)
	}
	return nil
}

// addTool mirrors t into the SDK. The SDK refuses (panics on) a tool whose input
// schema has x-mcp-header annotations it cannot carry (SEP-2243: a non-empty HTTP
// token on a string, integer or boolean property, unique without regard to case).
// propose_jit_tool refuses such schemas, but a candidate registered before that
// check may hold one: it is mirrored without its annotations (listed and callable,
// no Mcp-Param header bound), never allowed to stop the server.
func (s *Server) addTool(t *mcp.Tool) {
	add := func(t *mcp.Tool) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		s.srv.AddTool(t, s.handler)
		return nil
	}
	err := add(t)
	if err == nil {
		return
	}
	raw, _ := t.InputSchema.(json.RawMessage)
	stripped := *t
	stripped.InputSchema = stripParamHeaders(raw)
	s.log.Warn("mcp: a tool's x-mcp-header annotations are invalid; it is listed without them", "pid", s.pid, "tool", t.Name, "err", err)
	if err := add(&stripped); err != nil {
		s.log.Error("mcp: a tool cannot be listed", "pid", s.pid, "tool", t.Name, "err", err)
	}
}

// stripParamHeaders is the schema raw without any x-mcp-header member of a
// property (at any depth of properties), its numbers kept exactly.
func stripParamHeaders(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	var walk func(schema map[string]any)
	walk = func(schema map[string]any) {
		props, _ := schema["properties"].(map[string]any)
		for _, p := range props {
			if pm, ok := p.(map[string]any); ok {
				delete(pm, "x-mcp-header")
				walk(pm)
			}
		}
	}
	walk(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return out
}

// intercept takes every tools/call before the SDK's name lookup, so the engine's
// adapter and projection decide about every name, and makes the error of every
// method one that can be written (wireerr.go).
func (s *Server) intercept(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
			res, err = s.handler(ctx, r)
		} else if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "initialize" && ss.InitializeParams() != nil {
			// The transports refuse it first (outOfOrder); this is for any other.
			err = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "mcp: the session is already initialized: initialize comes once"}
		} else {
			res, err = next(ctx, method, req)
		}
		if err == nil {
			return res, nil
		}
		if r, ok := req.(*mcp.ReadResourceRequest); ok && r.Params != nil && sameError(err, mcp.ResourceNotFoundError(r.Params.URI)) {
			// The SDK's own not-found error, whose data is not JSON for every URI.
			err = resourceNotFound(r.Params.URI)
		}
		return nil, wireError(err)
	}
}

// handler runs one tools/call through the kernel.
func (s *Server) handler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
	}
	// The transports checked the message exactly (gate.go), so the SDK's decoding of
	// the name is the name as sent, and the arguments are the bytes as sent.
	frame, err := Frame(req.Params.Name, req.Params.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	stateless := false
	if v, _ := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string); v >= statelessRevision {
		stateless = true
		var stop context.CancelFunc
		ctx, stop = s.callContext(ctx, req)
		defer stop()
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// The client asked for progress: each step the call reports (a test run by
		// validate_jit_tool) is a notifications/progress on this request.
		ss := req.Session
		ctx = engine.WithProgress(ctx, func(done, total int, message string) {
			err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(done), Total: float64(total), Message: message})
			if err != nil {
				s.log.Info("mcp: a progress notification was not sent", "pid", s.pid, "err", err)
			}
		})
	}
	ctx, asked, err := s.approvalContext(ctx, req, stateless)
	if err != nil {
		return nil, stateError(err)
	}
	res, err := s.k.HandleFrame(ctx, s.pid, frame)
	if a := asked(); a != nil && liberr.CodeOf(err) == engine.CodeApprovalRequired {
		return s.inputRequired(ctx, req.Params.Name, *a)
	}
	var out *mcp.CallToolResult
	if err != nil {
		if out, err = s.failure(req.Params.Name, err); err != nil {
			return nil, err
		}
	} else {
		out = Success(res)
	}
	if stateless {
		// The stateless revision says what kind of result this is: a complete one.
		// The SDK marks the results of its own tool handlers; this one bypasses them.
		return complete(out), nil
	}
	return out, nil
}

// complete is res marked with resultType "complete". The SDK keeps the result type
// unexported and sets it only when decoding, so it is set that way.
func complete(res *mcp.CallToolResult) *mcp.CallToolResult {
	marked := &mcp.CallToolResult{}
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), marked); err != nil {
		return res
	}
	marked.Meta, marked.Content, marked.StructuredContent, marked.IsError = res.Meta, res.Content, res.StructuredContent, res.IsError
	return marked
}

// Frame is the provider frame of a tools/call: the name as sent and the arguments
// bytes exactly as they arrived (absent arguments stay absent).
func Frame(name string, args json.RawMessage) ([]byte, error) {
	n, err := json.Marshal(name)
	if err != nil {
		return nil, fmt.Errorf("mcp: tool name: %w", err)
	}
	if len(args) == 0 {
		return []byte(`{"name":` + string(n) + `}`), nil
	}
	return []byte(`{"name":` + string(n) + `,"arguments":` + string(args) + `}`), nil
}

// Success maps a normalised result to MCP: the canonical JSON as text content, and as
// structuredContent when it is an object (MCP requires an object there).
func Success(res *engine.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}}
	if len(res.Structured) > 0 && res.Structured[0] == '{' {
		out.StructuredContent = res.Structured
	}
	return out
}

// ErrorMetaKey is the _meta key of an isError result that carries the typed error.
const ErrorMetaKey = "libos/error"

// ToolError is the typed error of an isError result, under ErrorMetaKey in its
// _meta. It is not structuredContent: clients check structuredContent against the
// tool's output schema even on errors, and an error is not the tool's output.
type ToolError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Tool    string          `json:"tool,omitempty"`
	Details []engine.Detail `json:"details,omitempty"`
}

// failure maps an engine error: a protocol-frame failure is a JSON-RPC error (nothing
// was dispatched), a failure of the server itself (storage, a closed kernel, a lost
// process) is a JSON-RPC internal error, and every other failure is a tool result with
// isError and the typed code, which the model can read and act on.
func (s *Server) failure(name string, err error) (*mcp.CallToolResult, error) {
	code := string(liberr.CodeOr(err, liberr.CodeToolFailed))
	msg := err.Error()
	var te ToolError
	var e *engine.Error
	if errors.As(err, &e) {
		msg = e.Message
		te.Tool = name
		te.Details = e.Details
	}
	te.Code, te.Message = code, msg
	data, _ := json.Marshal(te)
	switch engine.Code(code) {
	case engine.CodeProtocolFrame, engine.CodeRequestStateInvalid:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: code + ": " + msg, Data: data}
	case engine.CodeStorage, engine.CodeClosed, engine.CodeUnknownProcess:
		s.log.Error("mcp: tool call failed in the server", "pid", s.pid, "tool", name, "code", code, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: code + ": " + msg, Data: data}
	}
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{ErrorMetaKey: json.RawMessage(data)},
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: code + ": " + msg}},
	}, nil
}
