package engine

import (
	"context"
	"encoding/json"
)

// Events of access decisions: a transport that authenticates its clients (the MCP
// server over HTTP) records who was admitted to a process and who was refused, so
// that the process's log says who could drive it.
const (
	EventClientAuthorized = "client_authorized"
	EventClientRefused    = "client_refused"
)

// Access is one access decision about a process, as its event records it. It names
// the principal (how it authenticated, its subject, issuer, client and scopes) and
// never a credential: the transport that decides leaves tokens out.
type Access struct {
	Granted  bool     `json:"-"`
	Method   string   `json:"method"`           // "token" (a static token) or "oauth" (an issuer's JWT)
	Subject  string   `json:"subject"`          // the token's id, or the JWT's sub
	Issuer   string   `json:"issuer,omitempty"` // the JWT's iss
	ClientID string   `json:"client_id,omitempty"`
	Scopes   []string `json:"scopes"`
	Via      string   `json:"via"`              // the transport, as "mcp-http"
	Code     string   `json:"code,omitempty"`   // a refusal's code
	Reason   string   `json:"reason,omitempty"` // a refusal's message
}

// RecordAccess appends a client_authorized (a.Granted) or client_refused event to
// process pid's log, synced. It is an error to call it for a process the kernel does
// not hold.
func (k *Kernel) RecordAccess(ctx context.Context, pid string, a Access) error {
	if err := k.enter(); err != nil {
		return err
	}
	defer k.calls.Done()
	p, err := k.process(pid)
	if err != nil {
		return err
	}
	typ := EventClientRefused
	if a.Granted {
		typ = EventClientAuthorized
	}
	if a.Scopes == nil {
		a.Scopes = []string{}
	}
	data, _ := json.Marshal(a)
	if _, err := k.st.Append(ctx, p.pid, typ, data); err != nil {
		return storageErr("record an access decision", err)
	}
	return nil
}
