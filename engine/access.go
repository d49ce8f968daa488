package engine

import (
	"context"
	"encoding/json"
	"time"
)

// Events of access decisions: a transport that authenticates its clients (the MCP
// server over HTTP) records who was admitted to a process and who was refused, so
// that the process's log says who could drive it.
const (
	EventClientAuthorized = "client_authorized"
	EventClientRefused    = "client_refused"
)

// Access is one access decision about a process, or several alike, as its event
// records it. It names the principal (how it authenticated, its subject, issuer,
// client and scopes) and never a credential: the transport that decides leaves tokens
// out. A request refused before any principal was established (no token, one that
// does not verify) has Method "none" and the client's address instead.
type Access struct {
	Granted  bool     `json:"-"`
	Method   string   `json:"method"`           // "token" (a static token), "oauth" (an issuer's JWT) or "none"
	Subject  string   `json:"subject"`          // the token's id, or the JWT's sub
	Issuer   string   `json:"issuer,omitempty"` // the JWT's iss
	ClientID string   `json:"client_id,omitempty"`
	Scopes   []string `json:"scopes"`
	Via      string   `json:"via"`              // the transport, as "mcp-http"
	Code     string   `json:"code,omitempty"`   // a refusal's code
	Reason   string   `json:"reason,omitempty"` // a refusal's message
	Remote   string   `json:"remote,omitempty"` // the client's address (Method "none")
	// Count is how many decisions, alike in everything above, the event stands for
	// (1 when zero): the transport may count repeated decisions and record them
	// together. Since is when the first of them was taken (Count > 1).
	Count int64     `json:"count"`
	Since time.Time `json:"since,omitzero"`
}

// RecordAccess appends a client_authorized (a.Granted) or client_refused event to
// process pid's log, synced. It is an error to call it for a process the kernel does
// not hold.
func (k *Kernel) RecordAccess(ctx context.Context, pid string, a Access) error {
	p, err := k.enterProcess(pid)
	if err != nil {
		return err
	}
	defer k.calls.Done()
	typ := EventClientRefused
	if a.Granted {
		typ = EventClientAuthorized
	}
	if a.Scopes == nil {
		a.Scopes = []string{}
	}
	if a.Count < 1 {
		a.Count = 1
	}
	data, _ := json.Marshal(a)
	if _, err := k.st.Append(ctx, p.pid, typ, data); err != nil {
		return storageErr("record an access decision", err)
	}
	return nil
}
