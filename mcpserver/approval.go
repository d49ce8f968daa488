package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
)

// Approvals through the client. A call that needs an operator's approval waits for
// 'libos approve' (engine.Kernel.Approve). When the client declares that it can
// elicit (ask its human), it is asked instead, with what the approval covers: the
// tool, its exact arguments (their digest when large), the SHA-256 of the tool's
// definition, and that the decision covers this one call with exactly those. The
// answer is the same durable approval record as the operator's, decided by the
// client as it names itself (its clientInfo), with the same events.
//
//   - 2025-11-25 (a session): the server sends elicitation/create during the call
//     and the call waits for the decision, as it waits for the operator's; the
//     operator may still decide first.
//   - 2026-07-28 (stateless): the call ends with an input_required result whose
//     inputRequests hold the elicitation and whose requestState is authenticated
//     (HMAC-SHA-256 with a key the store keeps) and bound to the process, the
//     approval (the call that asked), the tool name as called, the arguments' digest
//     and the definition's hash. The retry brings the answer and the state back; a
//     state that fails authentication or names another process is refused here, and
//     the kernel refuses one bound to another call, arguments or definition, or one
//     already used (request_state_invalid). Only the approval of the called tool is
//     asked this way; the syscalls a JIT tool makes wait for the operator.
//
// A client without elicitation changes nothing: the operator decides.

// approvalInput is the key of the elicitation in inputRequests and inputResponses.
const approvalInput = "approval"

// stateSecret names the store secret that authenticates requestState.
const stateSecret = "mcp-request-state"

// maxShownArgs is the largest arguments text an elicitation shows whole; larger
// arguments are shown by their size and SHA-256.
const maxShownArgs = 2048

// requestState is what a requestState carries, authenticated.
type requestState struct {
	V                int    `json:"v"`
	PID              string `json:"pid"`
	Approval         string `json:"approval"`
	Name             string `json:"name"`
	ArgsSHA256       string `json:"args_sha256"`
	DefinitionSHA256 string `json:"definition_sha256"`
}

// stateKey is the HMAC key of requestState, read from the store once.
func (s *Server) stateKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hmacKey == nil {
		k, err := s.k.Secret(context.WithoutCancel(ctx), stateSecret)
		if err != nil {
			return nil, err
		}
		s.hmacKey = k
	}
	return s.hmacKey, nil
}

func stateMAC(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("libos mcp requestState v1\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

// sealState is st as an opaque requestState: the payload and its MAC, base64url.
func sealState(key []byte, st requestState) string {
	payload, _ := json.Marshal(st)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(stateMAC(key, payload))
}

// openState authenticates raw and reads it; every failure is request_state_invalid.
func openState(key []byte, raw, pid string) (requestState, error) {
	bad := func(format string, args ...any) error {
		return &liberr.Error{Layer: "mcpserver", Code: engine.CodeRequestStateInvalid, Message: fmt.Sprintf(format, args...)}
	}
	enc := base64.RawURLEncoding
	p, m, ok := strings.Cut(raw, ".")
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, stateMAC(key, payload)) {
		return requestState{}, bad("requestState fails authentication: it was altered, or it was not issued by this server's store")
	}
	var st requestState
	if err := json.Unmarshal(payload, &st); err != nil || st.V != 1 {
		return requestState{}, bad("requestState is authentic but unreadable")
	}
	if st.PID != pid {
		return requestState{}, bad("requestState was issued for process %s, not for %s", st.PID, pid)
	}
	return st, nil
}

// clientOf is what the call's client declared: whether it can elicit, and its name
// as a decider. A stateless request declares both in its _meta; a session did at
// initialize.
func clientOf(req *mcp.CallToolRequest, stateless bool) (elicit bool, by string) {
	var info mcp.Implementation
	if stateless {
		meta := req.Params.Meta
		if caps, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any); ok {
			_, elicit = caps["elicitation"]
			elicit = elicit && caps["elicitation"] != nil
		}
		if b, err := json.Marshal(meta[mcp.MetaKeyClientInfo]); err == nil {
			_ = json.Unmarshal(b, &info)
		}
	} else if ss := req.Session; ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			elicit = ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
			if ip.ClientInfo != nil {
				info = *ip.ClientInfo
			}
		}
	}
	return elicit, decider(info)
}

// decider names a client in an approval's DecidedBy: "mcp-client", then its name
// and version as it gave them, printable and bounded.
func decider(info mcp.Implementation) string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			if unicode.IsPrint(r) {
				return r
			}
			return -1
		}, s)
		return liberr.Clip(strings.TrimSpace(s), 64)
	}
	by := "mcp-client"
	if n := clean(info.Name); n != "" {
		by += " " + n
		if v := clean(info.Version); v != "" {
			by += " " + v
		}
	}
	return by
}

// elicitation is the question asked of the client's human about approval a.
func elicitation(a engine.Approval) *mcp.ElicitParams {
	var b strings.Builder
	what := "a call of tool " + a.Tool
	if a.Kind == engine.ApprovalKindRoute {
		what = fmt.Sprintf("syscall %s (capability %s) made by tool %s", a.Subject, a.Capability, a.Tool)
	}
	fmt.Fprintf(&b, "Approve %s?\n\n", what)
	if len(a.Args) <= maxShownArgs {
		fmt.Fprintf(&b, "Arguments (exact, canonical JSON): %s\n", a.Args)
	} else {
		fmt.Fprintf(&b, "Arguments: %d bytes of canonical JSON, SHA-256 %s (too large to show; 'libos approvals' shows them)\n", len(a.Args), a.ArgsSHA256)
	}
	fmt.Fprintf(&b, "Tool definition SHA-256: %s\n\n", a.DefinitionSHA256)
	fmt.Fprintf(&b, "The approval covers this one %s with exactly these arguments and exactly this tool definition, once: other arguments or a changed definition ask again. Approval %s of process %s; the operator can decide it too.", strings.TrimPrefix(what, "a "), a.ID, a.PID)
	meta := map[string]any{"approval_id": a.ID, "pid": a.PID, "kind": a.Kind, "subject": a.Subject, "tool": a.Tool,
		"args_sha256": a.ArgsSHA256, "definition_sha256": a.DefinitionSHA256, "deadline": a.Deadline}
	if len(a.Args) <= maxShownArgs {
		meta["args"] = a.Args
	}
	return &mcp.ElicitParams{
		Meta:    mcp.Meta{"libos/approval": meta},
		Mode:    "form",
		Message: b.String(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve this call",
					"description": "true lets the call go ahead; false denies it"},
				"reason": map[string]any{"type": "string", "title": "Reason", "description": "why (optional; recorded with the decision)"},
			},
			"required": []string{"approve"},
		},
	}
}

// decisionOf reads a client's answer: accept with approve true approves; accept with
// approve false, decline and cancel deny. ok is false when res is no answer at all.
func decisionOf(res *mcp.ElicitResult) (approve bool, reason string, ok bool) {
	if res == nil {
		return false, "", false
	}
	r, _ := res.Content["reason"].(string)
	r = liberr.Clip(r, 500)
	switch res.Action {
	case "accept":
		a, isBool := res.Content["approve"].(bool)
		if !isBool {
			return false, "", false
		}
		return a, r, true
	case "decline":
		if r == "" {
			r = "declined by the client's user"
		}
		return false, r, true
	case "cancel":
		if r == "" {
			r = "dismissed by the client's user"
		}
		return false, r, true
	}
	return false, "", false
}

// askDuringCall is the asker of a session's call: it sends elicitation/create now
// and, on an answer, decides the approval; the call waits for the decision as for
// the operator's. A client that fails to answer leaves the approval to the operator.
func (s *Server) askDuringCall(ctx context.Context, ss *mcp.ServerSession, by string) func(engine.Approval) bool {
	return func(a engine.Approval) bool {
		go func() {
			res, err := ss.Elicit(ctx, elicitation(a))
			if err != nil {
				s.log.Info("mcp: the client did not answer an approval; the operator can decide it", "pid", s.pid, "approval", a.ID, "err", err)
				return
			}
			approve, reason, ok := decisionOf(res)
			if !ok {
				s.log.Info("mcp: the client's answer to an approval is not a decision; the operator can decide it", "pid", s.pid, "approval", a.ID)
				return
			}
			if err := s.k.DecideApproval(context.WithoutCancel(ctx), a.ID, approve, reason, by); err != nil {
				s.log.Info("mcp: the client's decision on an approval was not taken", "pid", s.pid, "approval", a.ID, "err", err)
			}
		}()
		return true
	}
}

// approvalContext prepares a call's context for approvals through its client. For a
// stateless call, asked returns the approval the call ended on (with
// approval_required), and a non-nil error refuses the call before it runs (a
// requestState that fails authentication).
func (s *Server) approvalContext(ctx context.Context, req *mcp.CallToolRequest, stateless bool) (context.Context, func() *engine.Approval, error) {
	none := func() *engine.Approval { return nil }
	elicit, by := clientOf(req, stateless)
	if !s.mayDecide(req) {
		// Without operator rights (auth.go) the client is neither asked nor heard:
		// its call waits for the operator, as a client without elicitation's does.
		return ctx, none, nil
	}
	by = s.decider(req, by)
	if !stateless {
		if elicit && req.Session != nil {
			ctx = engine.WithApprovalAsker(ctx, s.askDuringCall(ctx, req.Session, by))
		}
		return ctx, none, nil
	}
	if raw := req.Params.RequestState; raw != "" {
		key, err := s.stateKey(ctx)
		if err != nil {
			return ctx, none, err
		}
		st, err := openState(key, raw, s.pid)
		if err != nil {
			return ctx, none, err
		}
		if st.Name != req.Params.Name {
			return ctx, none, &liberr.Error{Layer: "mcpserver", Code: engine.CodeRequestStateInvalid,
				Message: fmt.Sprintf("requestState was issued for a call of %q, not of %q", st.Name, req.Params.Name)}
		}
		if res, ok := req.Params.InputResponses[approvalInput].(*mcp.ElicitResult); ok {
			if approve, reason, ok := decisionOf(res); ok {
				ctx = engine.WithClientDecision(ctx, engine.ClientDecision{ApprovalID: st.Approval, ArgsSHA256: st.ArgsSHA256,
					DefinitionSHA256: st.DefinitionSHA256, Approve: approve, Reason: reason, By: by})
			}
		}
		// A state without a usable answer asks again: the approval is still pending.
	}
	if !elicit {
		return ctx, none, nil
	}
	var asked *engine.Approval
	ctx = engine.WithApprovalAsker(ctx, func(a engine.Approval) bool {
		if a.Kind != engine.ApprovalKindTool {
			return true // a syscall's approval waits for the operator
		}
		asked = &a
		return false
	})
	return ctx, func() *engine.Approval { return asked }, nil
}

// inputRequired is the input_required result asking the client about approval a,
// with its authenticated state.
func (s *Server) inputRequired(ctx context.Context, name string, a engine.Approval) (*mcp.CallToolResult, error) {
	key, err := s.stateKey(ctx)
	if err != nil {
		return nil, err
	}
	out := &mcp.CallToolResult{}
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"input_required"}`), out); err != nil {
		return nil, err
	}
	out.Content = []mcp.Content{}
	out.InputRequests = mcp.InputRequestMap{approvalInput: elicitation(a)}
	out.RequestState = sealState(key, requestState{V: 1, PID: s.pid, Approval: a.ID, Name: name,
		ArgsSHA256: a.ArgsSHA256, DefinitionSHA256: a.DefinitionSHA256})
	return out, nil
}

// stateError is the JSON-RPC error of a refused requestState: invalid params, with
// the typed error in data.
func stateError(err error) error {
	te := ToolError{Code: string(liberr.CodeOr(err, liberr.CodeToolFailed)), Message: err.Error()}
	if e, ok := err.(*liberr.Error); ok {
		te.Message = e.Message
	}
	data, _ := json.Marshal(te)
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: te.Code + ": " + te.Message, Data: data}
}
