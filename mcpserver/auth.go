package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/loopback"
	"github.com/agentlibos/libos/liberr"
)

// Authorization of the streamable HTTP transport. Loopback HTTP needs none (the
// address is the boundary, as for stdio); an HTTP server others can reach needs an
// Authorizer, which admits a request only with a bearer token whose scope covers the
// served process. Two kinds of token are accepted, each or both:
//
//   - static tokens from a file (ParseTokenFile): each line is an id, the SHA-256 of
//     the token and the token's scopes; the token itself is never stored;
//   - OAuth 2.1 access tokens (JWTs) of one authorization server (OAuthConfig), the
//     MCP revision's resource-server role: RFC 9728 metadata, RFC 8707 audience.
//
// Both speak one vocabulary of scopes:
//
//	libos:process:PID   the MCP surface of process PID
//	libos:process:*     the MCP surface of every process
//	libos:operator      operator rights on the processes the token covers
//
// A request without a valid token is refused with 401 and a WWW-Authenticate
// challenge that names the resource metadata; a valid token whose scope does not
// cover the served process with 403 (insufficient_scope). Every refusal is logged
// with its code (never the token); every decision is accounted for in the served
// process's audit log (audit, below).

// The scopes of the vocabulary.
const (
	// ScopeOperator gives operator rights on the processes a token covers: the
	// client may answer approvals for them.
	ScopeOperator = "libos:operator"
	// ScopeAllProcesses covers every process of the store.
	ScopeAllProcesses = "libos:process:*"
	// scopeProcess prefixes the scope of one process.
	scopeProcess = "libos:process:"
)

// ProcessScope is the scope that covers process pid.
func ProcessScope(pid string) string { return scopeProcess + pid }

// The codes of authorization. Each is also the code of the JSON body of the HTTP
// refusal.
const (
	// CodeAuthRequired: the request carries no bearer token (401).
	CodeAuthRequired = "auth_required"
	// CodeTokenInvalid: the token is not one the server knows: no such static token,
	// a JWT that does not parse, is signed by no key of the issuer, with an algorithm
	// not accepted, without an expiry, or not valid yet (401).
	CodeTokenInvalid = "token_invalid"
	// CodeTokenExpired: the JWT's exp has passed (401).
	CodeTokenExpired = "token_expired"
	// CodeTokenAudience: the JWT's aud does not name this resource (RFC 8707) (401).
	CodeTokenAudience = "token_audience"
	// CodeTokenIssuer: the JWT's iss is not the configured issuer (401).
	CodeTokenIssuer = "token_issuer"
	// CodeScopeDenied: the token is valid but its scope does not cover the served
	// process (403).
	CodeScopeDenied = "scope_denied"
	// CodeAuthUnavailable: the issuer's keys could not be fetched, so no JWT can be
	// checked now (503).
	CodeAuthUnavailable = "auth_unavailable"
	// CodeInsecureListener: an HTTP server on an address beyond loopback without
	// authentication and TLS.
	CodeInsecureListener = "insecure_listener"
	// codeInvalidConfig: a token file or an authorization configuration is unusable.
	codeInvalidConfig = liberr.CodeInvalidConfig
)

const layerName = "mcpserver"

// Principal is who a request authenticated as.
type Principal struct {
	// Method is "token" (the token file) or "oauth" (a JWT of the issuer).
	Method string `json:"method"`
	// Subject is the token's id in the file, or the JWT's sub.
	Subject string `json:"subject"`
	// Issuer and ClientID are the JWT's iss and client_id (or azp); empty for
	// static tokens.
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// Scopes are the token's scopes of the libOS vocabulary, sorted.
	Scopes []string `json:"scopes"`
	// Expiry is the JWT's exp; zero for static tokens.
	Expiry time.Time `json:"-"`
}

// Covers reports whether the principal may use process pid.
func (p *Principal) Covers(pid string) bool {
	return slices.Contains(p.Scopes, ScopeAllProcesses) || slices.Contains(p.Scopes, ProcessScope(pid))
}

// Operator reports whether the principal has operator rights on the processes it
// covers.
func (p *Principal) Operator() bool { return slices.Contains(p.Scopes, ScopeOperator) }

// key identifies the principal for the SDK's session binding and for the audit
// log's deduplication: a session opened with one token cannot be used with another.
func (p *Principal) key() string {
	return p.Method + "\x00" + p.Issuer + "\x00" + p.Subject + "\x00" + strings.Join(p.Scopes, " ")
}

// principalExtra is the key of the Principal in the SDK's TokenInfo.Extra.
const principalExtra = "libos/principal"

// PrincipalOf is the principal a request of an authorized HTTP server authenticated
// as, nil on a server without authorization (stdio, loopback HTTP).
func PrincipalOf(req mcp.Request) *Principal {
	if req == nil {
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	p, _ := extra.TokenInfo.Extra[principalExtra].(*Principal)
	return p
}

// parseScopes keeps the scopes of the libOS vocabulary from a token's scopes and
// reports the others. A process scope names a PID or *.
func parseScopes(in []string) (known, unknown []string) {
	for _, s := range in {
		switch {
		case s == ScopeOperator || s == ScopeAllProcesses:
			known = append(known, s)
		case strings.HasPrefix(s, scopeProcess) && pidPattern().MatchString(strings.TrimPrefix(s, scopeProcess)):
			known = append(known, s)
		default:
			unknown = append(unknown, s)
		}
	}
	slices.Sort(known)
	return slices.Compact(known), unknown
}

// pidPattern is what a process scope may name: the characters of a PID, bounded.
var pidPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// Token is one static token of a token file: its id, the SHA-256 of the secret and
// its scopes. The secret itself is never kept.
type Token struct {
	ID     string
	SHA256 [sha256.Size]byte
	Scopes []string
}

var tokenIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`) })

// ParseTokenFile reads a token file: one token a line, as
//
//	ID sha256:HEX SCOPE...
//
// with the token's id (letters, digits, _ . @ -), the lowercase hex SHA-256 of the
// token, and at least one scope of the vocabulary, one process scope among them.
// Blank lines and lines starting with # are ignored. Every problem is reported at
// once, as an invalid_config error with one detail per line at fault; an unknown
// scope is an error, never ignored.
func ParseTokenFile(data []byte) ([]Token, error) {
	var out []Token
	var details []liberr.Detail
	ids := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("line %d", i+1)
		bad := func(format string, args ...any) {
			details = append(details, liberr.Detail{Path: where, Message: fmt.Sprintf(format, args...)})
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			bad("want ID sha256:HEX SCOPE..., got %d fields", len(f))
			continue
		}
		t := Token{ID: f[0]}
		if !tokenIDPattern().MatchString(t.ID) {
			bad("token id %q is not 1 to 64 letters, digits, _ . @ or -", liberr.Clip(t.ID, 80))
		} else if ids[t.ID] {
			bad("token id %q is listed twice", t.ID)
		}
		ids[t.ID] = true
		h, ok := strings.CutPrefix(f[1], "sha256:")
		sum, err := hex.DecodeString(h)
		if !ok || err != nil || len(sum) != sha256.Size || h != strings.ToLower(h) {
			bad("the hash must be sha256: and 64 lowercase hex digits (the token itself never goes in the file)")
		} else {
			copy(t.SHA256[:], sum)
			if hashes[t.SHA256] {
				bad("the same token hash is listed twice")
			}
			hashes[t.SHA256] = true
		}
		known, unknown := parseScopes(f[2:])
		for _, u := range unknown {
			bad("unknown scope %q (want %s, %sPID or %s)", liberr.Clip(u, 80), ScopeAllProcesses, scopeProcess, ScopeOperator)
		}
		t.Scopes = known
		if !slices.ContainsFunc(known, func(s string) bool { return strings.HasPrefix(s, scopeProcess) }) {
			bad("the token covers no process: add %sPID or %s", scopeProcess, ScopeAllProcesses)
		}
		out = append(out, t)
	}
	if len(details) > 0 {
		return nil, &liberr.Error{Code: codeInvalidConfig, Layer: layerName,
			Message: "the token file is unusable: " + liberr.DescribeDetails(details), Details: details}
	}
	return out, nil
}

// NewToken makes a static token with id and scopes: the secret, to hand to the
// client once, and the line of the token file that stands for it (its hash, never
// the secret).
func NewToken(id string, scopes []string) (secret, line string, err error) {
	// The line is checked by the parser that reads it back.
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", fmt.Errorf("mcpserver: random token: %w", err)
	}
	secret = "libos_" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(secret))
	line = id + " sha256:" + hex.EncodeToString(sum[:]) + " " + strings.Join(scopes, " ")
	if _, err := ParseTokenFile([]byte(line)); err != nil {
		return "", "", err
	}
	return secret, line, nil
}

// AuthConfig configures NewAuthorizer. At least one of Tokens, TokenFile and OAuth
// is set.
type AuthConfig struct {
	// Tokens are the static tokens (ParseTokenFile).
	Tokens []Token
	// TokenFile, when set, is the token file the static tokens come from, kept in
	// step: the authorizer reads it at once (Tokens is then ignored), and again when
	// a request comes at least TokenCheck after the last look and on ReloadTokens.
	// When its content changed, the tokens it lists replace the old ones: a token
	// removed from the file stops working, one added starts, without a restart. A
	// file that became unreadable or invalid changes nothing (the tokens last read
	// stay, and the log says why).
	TokenFile string
	// TokenCheck is how often the token file is looked at; zero is
	// DefaultTokenCheck.
	TokenCheck time.Duration
	// OAuth, when set, accepts the JWT access tokens of one authorization server.
	OAuth *OAuthConfig
	// Logger receives every refusal (with its code, never the token); nil discards.
	Logger *slog.Logger
}

// DefaultTokenCheck is how often, at most, an Authorizer looks at its token file for
// changes: a revoked token works for at most this long after the file changed.
const DefaultTokenCheck = time.Second

// maxTokenFileBytes bounds a token file (a line is about 100 bytes).
const maxTokenFileBytes = 4 << 20

// Authorizer decides which HTTP requests reach a served process. Set it as
// Options.Auth: Handler then refuses every request it does not admit, and
// MetadataHandler serves the RFC 9728 metadata clients discover it by.
type Authorizer struct {
	tokens atomic.Pointer[map[[sha256.Size]byte]*Token]
	oauth  *oauthVerifier
	log    *slog.Logger

	// The token file (AuthConfig.TokenFile) and what was last read from it.
	file      string
	every     time.Duration
	nextCheck atomic.Int64 // unix nanoseconds: the next request after it looks again
	reloadMu  sync.Mutex
	fileSum   [sha256.Size]byte
	lastErr   string // the last reload problem logged
}

// NewAuthorizer checks cfg and returns its Authorizer.
func NewAuthorizer(cfg AuthConfig) (*Authorizer, error) {
	a := &Authorizer{log: cfg.Logger, file: cfg.TokenFile, every: cfg.TokenCheck}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.every <= 0 {
		a.every = DefaultTokenCheck
	}
	tokens := cfg.Tokens
	if a.file != "" {
		data, err := readTokenFile(a.file)
		if err != nil {
			return nil, err
		}
		if tokens, err = ParseTokenFile(data); err != nil {
			return nil, err
		}
		a.fileSum = sha256.Sum256(data)
		a.nextCheck.Store(time.Now().Add(a.every).UnixNano())
	}
	m, err := tokenMap(tokens)
	if err != nil {
		return nil, err
	}
	a.tokens.Store(&m)
	if cfg.OAuth != nil {
		v, err := newOAuthVerifier(*cfg.OAuth)
		if err != nil {
			return nil, err
		}
		a.oauth = v
	}
	if len(m) == 0 && a.oauth == nil {
		return nil, liberr.New(layerName, codeInvalidConfig, "authorization needs static tokens or an OAuth issuer")
	}
	return a, nil
}

func tokenMap(tokens []Token) (map[[sha256.Size]byte]*Token, error) {
	m := make(map[[sha256.Size]byte]*Token, len(tokens))
	for i := range tokens {
		t := &tokens[i]
		if len(t.Scopes) == 0 {
			return nil, liberr.New(layerName, codeInvalidConfig, "token %q has no scope", t.ID)
		}
		m[t.SHA256] = t
	}
	return m, nil
}

func readTokenFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, liberr.Wrap(layerName, codeInvalidConfig, err, "the token file cannot be read")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, liberr.Wrap(layerName, codeInvalidConfig, err, "the token file cannot be read")
	}
	if len(data) > maxTokenFileBytes {
		return nil, liberr.New(layerName, codeInvalidConfig, "the token file is over %d bytes", maxTokenFileBytes)
	}
	return data, nil
}

// ReloadTokens reads the token file again (AuthConfig.TokenFile) and, when its
// content changed, serves the tokens it lists from now on. On an error (the file is
// unreadable or invalid) the tokens last read stay. Without a token file it does
// nothing. 'libos serve' calls it on SIGHUP; requests call it every TokenCheck.
func (a *Authorizer) ReloadTokens() error {
	if a.file == "" {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	a.nextCheck.Store(time.Now().Add(a.every).UnixNano())
	data, err := readTokenFile(a.file)
	if err == nil {
		sum := sha256.Sum256(data)
		if sum == a.fileSum {
			return nil
		}
		var tokens []Token
		var m map[[sha256.Size]byte]*Token
		if tokens, err = ParseTokenFile(data); err == nil {
			if m, err = tokenMap(tokens); err == nil {
				old := *a.tokens.Load()
				a.tokens.Store(&m)
				a.fileSum, a.lastErr = sum, ""
				var added, removed int
				for h := range m {
					if old[h] == nil {
						added++
					}
				}
				for h := range old {
					if m[h] == nil {
						removed++
					}
				}
				a.log.Info("mcp: the token file changed; its tokens are served now", "file", a.file, "tokens", len(m), "added", added, "removed", removed)
				return nil
			}
		}
	}
	if msg := err.Error(); msg != a.lastErr {
		// Said once per problem, not on every look while it lasts.
		a.lastErr = msg
		a.log.Error("mcp: the token file was not reloaded; the tokens last read stay", "file", a.file, "err", err)
	}
	return err
}

// checkTokens reloads the token file when a request comes TokenCheck after the last
// look; one request looks, the others go on with the tokens they find.
func (a *Authorizer) checkTokens() {
	if a.file == "" {
		return
	}
	next := a.nextCheck.Load()
	if time.Now().UnixNano() < next || !a.nextCheck.CompareAndSwap(next, time.Now().Add(a.every).UnixNano()) {
		return
	}
	_ = a.ReloadTokens()
}

// bearer is the token of the request's Authorization header, "" when there is none.
// Only the header carries a token: the MCP revision forbids tokens in the query.
func bearer(r *http.Request) (string, bool) {
	f := strings.Fields(r.Header.Get("Authorization"))
	if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
		return "", len(f) > 0
	}
	return f[1], true
}

// Authenticate is the principal of the request's bearer token, or the typed error
// that refuses it. It does not decide which process the principal may use (see
// Principal.Covers).
func (a *Authorizer) Authenticate(r *http.Request) (*Principal, error) {
	tok, present := bearer(r)
	if tok == "" {
		if present {
			return nil, liberr.New(layerName, CodeTokenInvalid, "the Authorization header is not \"Bearer TOKEN\"")
		}
		return nil, liberr.New(layerName, CodeAuthRequired, "this server needs a bearer token in the Authorization header")
	}
	a.checkTokens()
	sum := sha256.Sum256([]byte(tok))
	if t, ok := (*a.tokens.Load())[sum]; ok && subtle.ConstantTimeCompare(t.SHA256[:], sum[:]) == 1 {
		return &Principal{Method: "token", Subject: t.ID, Scopes: slices.Clone(t.Scopes)}, nil
	}
	if a.oauth != nil && strings.Count(tok, ".") == 2 {
		return a.oauth.verify(r.Context(), tok)
	}
	return nil, liberr.New(layerName, CodeTokenInvalid, "the bearer token is not one this server accepts")
}

// status is the HTTP status of an authorization code.
func status(code liberr.Code) int {
	switch code {
	case CodeScopeDenied:
		return http.StatusForbidden
	case CodeAuthUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// refuse answers a refused request: the status of its code, a WWW-Authenticate
// challenge (RFC 6750, with the RFC 9728 resource_metadata) and a JSON body with the
// code, the OAuth error and the message.
func (a *Authorizer) refuse(w http.ResponseWriter, r *http.Request, pid string, err error) {
	e := liberr.Outermost(err)
	if e == nil {
		e = liberr.Wrap(layerName, CodeTokenInvalid, err, "the bearer token is not one this server accepts")
	}
	st := status(e.Code)
	var params []string
	oauthErr := ""
	switch st {
	case http.StatusUnauthorized:
		if e.Code != CodeAuthRequired {
			oauthErr = "invalid_token" // RFC 6750 3: no error code when no token was sent
		}
	case http.StatusForbidden:
		oauthErr = "insufficient_scope"
	}
	if oauthErr != "" {
		params = append(params, `error="`+oauthErr+`"`, `error_description="`+quotable(e.Message)+`"`)
	}
	if st == http.StatusForbidden || (st == http.StatusUnauthorized && a.oauth != nil) {
		params = append(params, `scope="`+ProcessScope(pid)+`"`)
	}
	if a.oauth != nil {
		params = append(params, `resource_metadata="`+a.oauth.metadataURL+`"`)
	}
	if st != http.StatusServiceUnavailable {
		h := "Bearer"
		if len(params) > 0 {
			h += " " + strings.Join(params, ", ")
		}
		w.Header().Set("WWW-Authenticate", h)
	}
	a.log.Warn("mcp: request refused", "code", e.Code, "status", st, "reason", e.Message,
		"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "pid", pid)
	body, _ := json.Marshal(map[string]string{"code": string(e.Code), "error": oauthErr, "message": e.Error()})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(st)
	_, _ = w.Write(append(body, '\n'))
}

// quotable makes s safe inside an HTTP quoted-string: no quote, backslash or control
// character.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f || r > 0x7e {
			return ' '
		}
		return r
	}, liberr.Clip(s, 200))
}

// guard admits to next only the requests whose principal covers the served
// process. An admitted request carries its principal in the SDK's TokenInfo, so a
// session opened with one token is refused to another and tool handlers read it with
// PrincipalOf.
func (s *Server) guard(next http.Handler) http.Handler {
	a := s.auth
	type principalKey struct{}
	var skew time.Duration
	if a.oauth != nil {
		skew = a.oauth.skew
	}
	sdk := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := r.Context().Value(principalKey{}).(*Principal)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: p.Scopes, Expiration: p.Expiry, UserID: p.key(), Extra: map[string]any{principalExtra: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: skew})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err == nil && !p.Covers(s.pid) {
			err = liberr.New(layerName, CodeScopeDenied, "the token's scope does not cover process %s (it needs %s or %s)", s.pid, ProcessScope(s.pid), ScopeAllProcesses)
			s.audit(r.Context(), r, p, false, err)
		} else if err != nil {
			s.audit(r.Context(), r, nil, false, err)
		}
		if err != nil {
			a.refuse(w, r, s.pid, err)
			return
		}
		s.audit(r.Context(), r, p, true, nil)
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// Access decisions in the process's audit log (engine.Kernel.RecordAccess). Every
// decision is accounted for, without an entry per admitted request (a client sends
// many, and each entry is a synced write):
//
//   - a refusal of a known principal (a valid token whose scope does not cover the
//     process) is recorded at once, one event per request;
//   - admissions are counted per principal: the first is recorded at once, the next
//     ones together, as one event with their count, on the first request a minute
//     (accessEvery) after the last record, and when the server flushes (FlushAccess,
//     Close);
//   - refusals before any principal is known (no token, a token that does not
//     verify) are counted the same way per code and client address, so that a
//     client without a credential cannot make the server write at its pace.
//
// The counts of at most maxTallies keys are kept; beyond, further keys of a kind
// are counted together (address "*").

// accessEvery is how long counted decisions of one key wait, at most, for the next
// request that records them.
const accessEvery = time.Minute

// maxTallies bounds the keys counted between records.
const maxTallies = 4096

// tally is the decisions of one key not recorded yet.
type tally struct {
	acc   engine.Access
	count int64     // decisions since the last record
	since time.Time // the first of them
	last  time.Time // the last record; zero before the first
}

// audit accounts for one access decision: p is the principal (nil when none was
// established), refusal the typed error of a refusal.
func (s *Server) audit(ctx context.Context, r *http.Request, p *Principal, granted bool, refusal error) {
	acc := engine.Access{Granted: granted, Method: "none", Via: "mcp-http"}
	if p != nil {
		acc.Method, acc.Subject, acc.Issuer, acc.ClientID, acc.Scopes = p.Method, p.Subject, p.Issuer, p.ClientID, p.Scopes
	}
	if refusal != nil {
		if e := liberr.Outermost(refusal); e != nil {
			acc.Code, acc.Reason = string(e.Code), e.Message
		}
	}
	if p != nil && !granted {
		s.record(ctx, acc)
		return
	}
	key := "granted\x00"
	if p != nil {
		key += p.key()
	} else {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		acc.Remote = liberr.Clip(host, 64)
		key = "anonymous\x00" + acc.Code + "\x00" + acc.Remote
	}
	now := time.Now()
	s.authMu.Lock()
	if s.tallies == nil {
		s.tallies = map[string]*tally{}
	}
	t := s.tallies[key]
	if t == nil && len(s.tallies) >= maxTallies {
		// Too many keys: count this one with the others of its kind.
		if p != nil {
			acc.Subject, acc.Issuer, acc.ClientID, acc.Scopes = "*", "", "", nil
		} else {
			acc.Remote = "*"
		}
		key = key[:strings.IndexByte(key, 0)] + "\x00*" + acc.Code
		t = s.tallies[key]
	}
	if t == nil {
		t = &tally{acc: acc}
		s.tallies[key] = t
	}
	if t.count == 0 {
		t.since = now
	}
	t.count++
	due := t.last.IsZero() || now.Sub(t.last) >= accessEvery
	var rec engine.Access
	if due {
		rec = t.acc
		rec.Count, rec.Since = t.count, t.since
		t.count, t.last = 0, now
	}
	s.authMu.Unlock()
	if due && !s.record(ctx, countSince(rec)) {
		s.authMu.Lock()
		t.count += rec.Count // recorded next time
		if t.since.IsZero() || rec.Since.Before(t.since) {
			t.since = rec.Since
		}
		s.authMu.Unlock()
	}
}

// countSince leaves Since out of an event that stands for one decision.
func countSince(a engine.Access) engine.Access {
	if a.Count <= 1 {
		a.Since = time.Time{}
	}
	return a
}

func (s *Server) record(ctx context.Context, acc engine.Access) bool {
	if err := s.k.RecordAccess(context.WithoutCancel(ctx), s.pid, acc); err != nil {
		s.log.Error("mcp: could not record an access decision", "pid", s.pid, "err", err)
		return false
	}
	return true
}

// FlushAccess records the access decisions counted and not recorded yet. Call it
// before the kernel closes; Close calls it too.
func (s *Server) FlushAccess(ctx context.Context) {
	s.authMu.Lock()
	var recs []engine.Access
	for _, t := range s.tallies {
		if t.count > 0 {
			rec := t.acc
			rec.Count, rec.Since = t.count, t.since
			recs = append(recs, countSince(rec))
			t.count = 0
		}
	}
	s.authMu.Unlock()
	for _, rec := range recs {
		s.record(ctx, rec)
	}
}

// mayDecide reports whether the client of req may answer an approval: on a server
// without authorization any client may (it is the machine's own, on stdio or
// loopback); on one with authorization, only a principal with operator rights.
func (s *Server) mayDecide(req mcp.Request) bool {
	if s.auth == nil {
		return true
	}
	p := PrincipalOf(req)
	return p != nil && p.Operator()
}

// decider adds to the client's name in an approval's DecidedBy the principal that
// authenticated it (its method and subject, never a token), when there is one.
func (s *Server) decider(req mcp.Request, by string) string {
	p := PrincipalOf(req)
	if p == nil {
		return by
	}
	who := p.Subject
	if who == "" {
		who = p.ClientID
	}
	return by + " (" + p.Method + " " + liberr.Clip(who, 64) + ")"
}

// MetadataHandler serves the RFC 9728 protected-resource metadata of the served
// process at /.well-known/oauth-protected-resource and at the same path followed by
// the resource's path (/.well-known/oauth-protected-resource/mcp for a resource
// https://host/mcp), where MCP clients look for it. Mount it on the server's root:
//
//	mux.Handle("/.well-known/oauth-protected-resource", srv.MetadataHandler())
//	mux.Handle("/.well-known/oauth-protected-resource/", srv.MetadataHandler())
//
// Without OAuth it answers 404: static tokens are not obtained from an
// authorization server.
func (s *Server) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth == nil || s.auth.oauth == nil {
			http.NotFound(w, r)
			return
		}
		o := s.auth.oauth
		if r.URL.Path != ResourceMetadataPath && r.URL.Path != o.metadataPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, _ := json.Marshal(map[string]any{
			"resource":                 o.audience,
			"authorization_servers":    []string{o.issuer},
			"scopes_supported":         []string{ProcessScope(s.pid), ScopeAllProcesses, ScopeOperator},
			"bearer_methods_supported": []string{"header"},
			"resource_name":            "libos process " + s.pid,
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
}

// ResourceMetadataPath is the well-known path of RFC 9728 metadata. MetadataHandler
// serves it and the path-suffixed form beneath it.
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// metadataLocation is the metadata URL and path of a resource URI (RFC 9728 3.1:
// the well-known path goes between the host and the resource's path).
func metadataLocation(resource *url.URL) (string, string) {
	p := ResourceMetadataPath + strings.TrimSuffix(resource.EscapedPath(), "/")
	u := url.URL{Scheme: resource.Scheme, Host: resource.Host, Path: p}
	return u.String(), p
}

// CheckExposure refuses an HTTP server on addr (host:port) that others than this
// machine can reach without both authentication and TLS: a bearer token in clear
// text is anyone's on the path, and a server without authentication is anyone's.
// Loopback addresses (127.0.0.0/8, ::1, localhost) need neither. With insecure the
// check is skipped: the caller takes the exposure on purpose (a private network, a
// TLS-terminating proxy in front). The error has the code insecure_listener and
// says what is missing.
func CheckExposure(addr string, authenticated, tls, insecure bool) error {
	if insecure || (authenticated && tls) {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return liberr.Wrap(layerName, codeInvalidConfig, err, "HTTP address %q is not host:port", addr)
	}
	if loopback.Host(host) {
		return nil
	}
	var missing []string
	if !authenticated {
		missing = append(missing, "authentication")
	}
	if !tls {
		missing = append(missing, "TLS")
	}
	where := host
	if ip := net.ParseIP(strings.Trim(host, "[]")); host == "" || (ip != nil && ip.IsUnspecified()) {
		where = strings.TrimSpace(host + " (every interface)")
	}
	return liberr.New(layerName, CodeInsecureListener,
		"refusing to serve HTTP on %s, beyond loopback, without %s; bind 127.0.0.1, add them, or accept the exposure explicitly (--insecure)",
		where, strings.Join(missing, " and "))
}

// authState is the Server's part of authorization.
type authState struct {
	auth    *Authorizer
	authMu  sync.Mutex
	tallies map[string]*tally
}
