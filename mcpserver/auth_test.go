package mcpserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
)

// issuer is an OAuth authorization server on loopback as far as a resource server
// sees one: RFC 8414 metadata and a JWKS, with keys made in the test. Tokens are
// minted with its keys.
type issuer struct {
	srv *httptest.Server
	url string

	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey // kid → key
	publish []string                     // the kids the JWKS publishes
	fetches int                          // JWKS fetches
	down    bool                         // the JWKS answers 500
}

func newIssuer(t *testing.T) *issuer { return newIssuerB(t) }

func newIssuerB(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{keys: map[string]*ecdsa.PrivateKey{}}
	is.addKey(t, "k1", true)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.url, "jwks_uri": is.url + "/jwks",
			"authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.fetches++
		if is.down {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		var set jose.JSONWebKeySet
		for _, kid := range is.publish {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: is.keys[kid].Public(), KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL
	return is
}

// addKey makes a signing key; published keys are in the JWKS.
func (is *issuer) addKey(t testing.TB, kid string, published bool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	if published {
		is.publish = append(is.publish, kid)
	}
}

func (is *issuer) jwksFetches() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.fetches
}

// grant is what a minted token says.
type grant struct {
	kid      string
	iss, sub string
	aud      []string
	scope    string
	exp, nbf time.Duration // from now; exp 0 leaves exp out
}

func (is *issuer) mint(t testing.TB, g grant) string {
	t.Helper()
	is.mu.Lock()
	key := is.keys[g.kid]
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: g.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := jwt.Claims{Issuer: g.iss, Subject: g.sub, Audience: jwt.Audience(g.aud), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute))}
	if g.exp != 0 {
		c.Expiry = jwt.NewNumericDate(now.Add(g.exp))
	}
	if g.nbf != 0 {
		c.NotBefore = jwt.NewNumericDate(now.Add(g.nbf))
	}
	raw, err := jwt.Signed(signer).Claims(c).Claims(map[string]any{"scope": g.scope, "client_id": "test-client"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// protected is an echo process served over HTTP on 127.0.0.1 behind an Authorizer.
type protected struct {
	s        *Server
	k        *engine.Kernel
	pid      string
	url      string // the MCP endpoint
	audience string
	logs     *bytes.Buffer
}

// serveProtected starts the server; cfg is completed with the audience (the
// endpoint's URL) once the listener's address is known.
func serveProtected(t *testing.T, cfg func(pid, audience string) AuthConfig) *protected {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil) // listens on 127.0.0.1
	p := &protected{k: k, pid: pid, logs: &bytes.Buffer{}}
	p.audience = "http://" + hs.Listener.Addr().String() + "/mcp"
	p.url = p.audience
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, p.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := cfg(pid, p.audience)
	c.Logger = log
	a, err := NewAuthorizer(c)
	if err != nil {
		t.Fatal(err)
	}
	p.s, err = New(k, pid, Options{Name: "test", Version: "1", Logger: log, Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.s.Close)
	mux := http.NewServeMux()
	mux.Handle("/mcp", p.s.Handler(nil))
	mux.Handle(ResourceMetadataPath, p.s.MetadataHandler())
	mux.Handle(ResourceMetadataPath+"/", p.s.MetadataHandler())
	hs.Config.Handler = mux
	hs.Start()
	t.Cleanup(hs.Close)
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// bearerTransport adds the token to every request of an MCP client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// callEcho runs a whole session with the Go SDK client on each revision (the
// stateless 2026-07-28 and the stateful 2025-11-25): connect, tools/call of echo.
func callEcho(t *testing.T, url, token string) {
	t.Helper()
	for _, rev := range []string{"", "2025-11-25"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
		if err != nil {
			cancel()
			t.Fatalf("connect (revision %q) with a valid token: %v", rev, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"said": "hi"}})
		cs.Close()
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("echo (revision %q) with a valid token: %v %+v", rev, err, res)
		}
	}
}

// authRefusal is what a raw POST got.
type authRefusal struct {
	status    int
	challenge string
	body      struct{ Code, Error, Message string }
}

func post(t *testing.T, url, authz string) authRefusal {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r authRefusal
	r.status = res.StatusCode
	r.challenge = res.Header.Get("WWW-Authenticate")
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("authRefusal body %q is not the typed JSON error: %v", raw, err)
		}
	}
	return r
}

func eventsOf(t *testing.T, k *engine.Kernel, pid, typ string) []map[string]any {
	t.Helper()
	evs, err := k.Events(pid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		if e.Type == typ {
			var m map[string]any
			_ = json.Unmarshal(e.Data, &m)
			out = append(out, m)
		}
	}
	return out
}

// allEvents is the process's whole log, as bytes to search.
func allEvents(t *testing.T, k *engine.Kernel, pid string) string {
	t.Helper()
	var b bytes.Buffer
	if err := k.ExportEvents(pid, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOAuthResourceServer: "OAuth 2.1 resource-server mode per the revision's
// authorization section — RFC 9728 protected-resource metadata, 401 with
// WWW-Authenticate: Bearer resource_metadata=…, JWT validation against a configured
// issuer's JWKS with audience (RFC 8707) and expiry checks". Each case is one token
// minted by a loopback issuer and sent to a real HTTP server on 127.0.0.1.
func TestOAuthResourceServer(t *testing.T) {
	is := newIssuer(t)
	other := newIssuer(t) // another authorization server, with keys of its own
	p := serveProtected(t, func(pid, aud string) AuthConfig {
		return AuthConfig{OAuth: &OAuthConfig{Issuer: is.url, Audience: aud}}
	})
	mine := ProcessScope(p.pid)
	metadataURL := strings.TrimSuffix(p.url, "/mcp") + ResourceMetadataPath + "/mcp"
	valid := grant{kid: "k1", iss: is.url, sub: "alice", aud: []string{p.audience}, scope: mine, exp: time.Hour}
	with := func(f func(g *grant)) grant { g := valid; f(&g); return g }

	var tokens []string
	t.Run("a valid token reaches the process", func(t *testing.T) {
		tok := is.mint(t, valid)
		tokens = append(tokens, tok)
		callEcho(t, p.url, tok)
		got := eventsOf(t, p.k, p.pid, engine.EventClientAuthorized)
		if len(got) != 1 || got[0]["subject"] != "alice" || got[0]["method"] != "oauth" || got[0]["issuer"] != is.url || got[0]["client_id"] != "test-client" {
			t.Fatalf("client_authorized events = %v, want one for alice (first admission only)", got)
		}
	})

	cases := []struct {
		rule      string
		token     func(t *testing.T) string
		status    int
		code      liberr.Code
		oauthErr  string
		challenge []string
	}{
		{"no token: 401 whose challenge names the resource metadata (RFC 9728 5.1)",
			func(*testing.T) string { return "" }, 401, CodeAuthRequired, "",
			[]string{`resource_metadata="` + metadataURL + `"`, `scope="` + mine + `"`}},
		{"a token for another resource is refused: audience (RFC 8707)",
			func(t *testing.T) string {
				return is.mint(t, with(func(g *grant) { g.aud = []string{"https://other.example/mcp"} }))
			}, 401, CodeTokenAudience, "invalid_token", []string{`error="invalid_token"`, `resource_metadata="` + metadataURL + `"`}},
		{"an expired token is refused",
			func(t *testing.T) string { return is.mint(t, with(func(g *grant) { g.exp = -time.Hour })) },
			401, CodeTokenExpired, "invalid_token", nil},
		{"a token without exp is refused: access tokens must expire",
			func(t *testing.T) string { return is.mint(t, with(func(g *grant) { g.exp = 0 })) },
			401, CodeTokenInvalid, "invalid_token", nil},
		{"a token not valid yet (nbf) is refused",
			func(t *testing.T) string { return is.mint(t, with(func(g *grant) { g.nbf = time.Hour })) },
			401, CodeTokenInvalid, "invalid_token", nil},
		{"a token naming another issuer is refused, even signed by the issuer's key",
			func(t *testing.T) string { return is.mint(t, with(func(g *grant) { g.iss = other.url })) },
			401, CodeTokenIssuer, "invalid_token", nil},
		{"a token signed by another server's key is refused",
			func(t *testing.T) string { return other.mint(t, valid) },
			401, CodeTokenInvalid, "invalid_token", nil},
		{"a token with an HMAC algorithm is refused (the keys are public)",
			func(t *testing.T) string {
				s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := jwt.Signed(s).Claims(jwt.Claims{Issuer: is.url, Audience: jwt.Audience{p.audience}, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Claims(map[string]any{"scope": mine}).Serialize()
				return raw
			}, 401, CodeTokenInvalid, "invalid_token", nil},
		{"a valid token for another process is refused with 403 insufficient_scope",
			func(t *testing.T) string {
				return is.mint(t, with(func(g *grant) { g.sub = "bob"; g.scope = ProcessScope("pid_other") + " " + ScopeOperator }))
			}, 403, CodeScopeDenied, "insufficient_scope", []string{`error="insufficient_scope"`, `scope="` + mine + `"`}},
		{"a valid token without any scope of the libOS is refused with 403",
			func(t *testing.T) string {
				return is.mint(t, with(func(g *grant) { g.sub = "carol"; g.scope = "openid email" }))
			},
			403, CodeScopeDenied, "insufficient_scope", nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			tok := c.token(t)
			authz := ""
			if tok != "" {
				authz = "Bearer " + tok
				tokens = append(tokens, tok)
			}
			r := post(t, p.url, authz)
			if r.status != c.status || r.body.Code != string(c.code) || r.body.Error != c.oauthErr {
				t.Fatalf("got %d %+v, want %d with code %s and OAuth error %q", r.status, r.body, c.status, c.code, c.oauthErr)
			}
			if !strings.HasPrefix(r.challenge, "Bearer") {
				t.Fatalf("WWW-Authenticate = %q, want a Bearer challenge", r.challenge)
			}
			for _, want := range c.challenge {
				if !strings.Contains(r.challenge, want) {
					t.Errorf("WWW-Authenticate = %q, want it to hold %s", r.challenge, want)
				}
			}
		})
	}

	t.Run("the metadata names the resource and its authorization server (RFC 9728)", func(t *testing.T) {
		for _, u := range []string{metadataURL, strings.TrimSuffix(p.url, "/mcp") + ResourceMetadataPath} {
			// The SDK's client-side fetch checks what a client checks: the resource
			// matches the URL the client connects to.
			m, err := oauthex.GetProtectedResourceMetadata(context.Background(), u, p.url, http.DefaultClient)
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if m.Resource != p.audience || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != is.url {
				t.Fatalf("%s: %+v", u, m)
			}
		}
	})

	t.Run("every refusal is audited: known principals' one by one, anonymous ones counted by code and address", func(t *testing.T) {
		refused := eventsOf(t, p.k, p.pid, engine.EventClientRefused)
		subjects := map[any]any{}
		anonymous := map[any]float64{}
		for _, e := range refused {
			if e["method"] == "none" {
				if e["subject"] != "" || e["remote"] != "127.0.0.1" {
					t.Errorf("an anonymous refusal names a subject or no address: %v", e)
				}
				anonymous[e["code"]] += e["count"].(float64)
				continue
			}
			subjects[e["subject"]] = e["code"]
		}
		if len(subjects) != 2 || subjects["bob"] != CodeScopeDenied || subjects["carol"] != CodeScopeDenied {
			t.Fatalf("client_refused events = %v, want bob's and carol's scope_denied", refused)
		}
		for _, c := range cases {
			if c.code != CodeScopeDenied && anonymous[string(c.code)] == 0 {
				t.Errorf("no client_refused event accounts for the refusal %q (%s): %v", c.rule, c.code, anonymous)
			}
		}
		logs := p.logs.String()
		for _, c := range cases {
			if !strings.Contains(logs, "code="+string(c.code)) {
				t.Errorf("the log has no authRefusal with code %s", c.code)
			}
		}
	})

	t.Run("no token enters the log or the store", func(t *testing.T) {
		log, evs := p.logs.String(), allEvents(t, p.k, p.pid)
		for _, tok := range tokens {
			sig := tok[strings.LastIndex(tok, ".")+1:]
			if strings.Contains(log, sig) || strings.Contains(evs, sig) {
				t.Fatalf("a token's signature is in the log or the store")
			}
		}
	})
}

// TestOAuthKeyRotation: the JWKS is cached and fetched again when a token names a key
// the cache does not hold; a made-up key id does not make the server fetch again
// within the refresh interval.
func TestOAuthKeyRotation(t *testing.T) {
	is := newIssuer(t)
	var refresh time.Duration = -1
	p := serveProtected(t, func(pid, aud string) AuthConfig {
		return AuthConfig{OAuth: &OAuthConfig{Issuer: is.url, Audience: aud, RefreshInterval: refresh}}
	})
	g := grant{kid: "k1", iss: is.url, sub: "alice", aud: []string{p.audience}, scope: ScopeAllProcesses, exp: time.Hour}
	callEcho(t, p.url, is.mint(t, g))
	if n := is.jwksFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", n)
	}
	if r := post(t, p.url, "Bearer "+is.mint(t, g)); r.status != http.StatusOK {
		t.Fatalf("a second token of a cached key: %d %+v", r.status, r.body)
	}
	if n := is.jwksFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want the cached keys used", n)
	}
	is.addKey(t, "k2", true) // the issuer rotates
	g.kid = "k2"
	if r := post(t, p.url, "Bearer "+is.mint(t, g)); r.status != http.StatusOK {
		t.Fatalf("a token of a rotated-in key: %d %+v", r.status, r.body)
	}
	if n := is.jwksFetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want one more for the unknown kid", n)
	}

	// With the default interval, an unknown kid right after a fetch is refused
	// without another fetch.
	is2 := newIssuer(t)
	p2 := serveProtected(t, func(pid, aud string) AuthConfig {
		return AuthConfig{OAuth: &OAuthConfig{Issuer: is2.url, Audience: aud}}
	})
	g2 := grant{kid: "k1", iss: is2.url, sub: "alice", aud: []string{p2.audience}, scope: ScopeAllProcesses, exp: time.Hour}
	if r := post(t, p2.url, "Bearer "+is2.mint(t, g2)); r.status != http.StatusOK {
		t.Fatalf("first token: %d %+v", r.status, r.body)
	}
	is2.addKey(t, "made-up", false)
	g2.kid = "made-up"
	for range 3 {
		if r := post(t, p2.url, "Bearer "+is2.mint(t, g2)); r.status != http.StatusUnauthorized || r.body.Code != CodeTokenInvalid {
			t.Fatalf("a token of an unpublished key: %d %+v", r.status, r.body)
		}
	}
	if n := is2.jwksFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1: unknown key ids within the refresh interval fetch nothing", n)
	}
}

// TestOAuthIssuerUnreachable: when the issuer's keys cannot be fetched, a token is
// neither accepted nor blamed: 503 auth_unavailable.
func TestOAuthIssuerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	is := newIssuer(t)
	p := serveProtected(t, func(pid, aud string) AuthConfig {
		return AuthConfig{OAuth: &OAuthConfig{Issuer: is.url, Audience: aud, JWKSURL: dead + "/jwks"}}
	})
	g := grant{kid: "k1", iss: is.url, sub: "alice", aud: []string{p.audience}, scope: ScopeAllProcesses, exp: time.Hour}
	if r := post(t, p.url, "Bearer "+is.mint(t, g)); r.status != http.StatusServiceUnavailable || r.body.Code != CodeAuthUnavailable {
		t.Fatalf("got %d %+v, want 503 auth_unavailable", r.status, r.body)
	}

	// An issuer that fails is asked once per refresh interval, not once per request.
	is.mu.Lock()
	is.down = true
	is.mu.Unlock()
	p2 := serveProtected(t, func(pid, aud string) AuthConfig {
		return AuthConfig{OAuth: &OAuthConfig{Issuer: is.url, Audience: aud}}
	})
	g.aud = []string{p2.audience}
	for range 3 {
		if r := post(t, p2.url, "Bearer "+is.mint(t, g)); r.status != http.StatusServiceUnavailable || r.body.Code != CodeAuthUnavailable {
			t.Fatalf("got %d %+v, want 503 auth_unavailable", r.status, r.body)
		}
	}
	if n := is.jwksFetches(); n != 1 {
		t.Fatalf("the failing JWKS was fetched %d times for 3 requests, want 1", n)
	}
}

// TestStaticTokens: "bearer tokens from a file (stored hashed, each with its scope:
// which processes, operator rights or not)".
func TestStaticTokens(t *testing.T) {
	var mine, others, all, opLine string
	var mineSecret, othersSecret, allSecret string
	p := serveProtected(t, func(pid, aud string) AuthConfig {
		var err error
		if mineSecret, mine, err = NewToken("ci", []string{ProcessScope(pid)}); err != nil {
			t.Fatal(err)
		}
		if othersSecret, others, err = NewToken("elsewhere", []string{ProcessScope("pid_other"), ScopeOperator}); err != nil {
			t.Fatal(err)
		}
		if allSecret, all, err = NewToken("ops@example", []string{ScopeAllProcesses, ScopeOperator}); err != nil {
			t.Fatal(err)
		}
		opLine = all
		file := "# tokens of this server\n\n" + mine + "\n" + others + "\n" + all + "\n"
		for _, s := range []string{mineSecret, othersSecret, allSecret} {
			if strings.Contains(file, s) {
				t.Fatal("the token file holds a token, not its hash")
			}
		}
		toks, err := ParseTokenFile([]byte(file))
		if err != nil {
			t.Fatal(err)
		}
		return AuthConfig{Tokens: toks}
	})
	callEcho(t, p.url, mineSecret)
	callEcho(t, p.url, allSecret)
	if !strings.Contains(opLine, ScopeOperator) {
		t.Fatalf("token line %q lost its operator scope", opLine)
	}
	got := eventsOf(t, p.k, p.pid, engine.EventClientAuthorized)
	if len(got) != 2 || got[0]["subject"] != "ci" || got[1]["subject"] != "ops@example" || got[0]["method"] != "token" {
		t.Fatalf("client_authorized = %v", got)
	}
	for _, c := range []struct {
		rule, authz string
		status      int
		code        liberr.Code
	}{
		{"no token is 401", "", 401, CodeAuthRequired},
		{"a token of another process is 403", "Bearer " + othersSecret, 403, CodeScopeDenied},
		{"a token nobody issued is 401", "Bearer libos_notatoken", 401, CodeTokenInvalid},
		{"the hash itself is not the token", "Bearer " + strings.Fields(mine)[1], 401, CodeTokenInvalid},
		{"another scheme is not a bearer token", "Basic " + mineSecret, 401, CodeTokenInvalid},
	} {
		t.Run(c.rule, func(t *testing.T) {
			r := post(t, p.url, c.authz)
			if r.status != c.status || r.body.Code != string(c.code) {
				t.Fatalf("got %d %+v, want %d %s", r.status, r.body, c.status, c.code)
			}
			if strings.Contains(r.challenge, "resource_metadata") {
				t.Fatalf("static tokens have no authorization server to point at: %q", r.challenge)
			}
		})
	}
	t.Run("a session opened with one token is not usable with another", func(t *testing.T) {
		ctx := context.Background()
		c := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearerTransport{mineSecret}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if cs.ID() == "" {
			t.Fatal("a 2025-11-25 session has no id")
		}
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+allSecret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("another token on session %q: %d %s, want 403", cs.ID(), res.StatusCode, b)
		}
	})
	if evs := allEvents(t, p.k, p.pid); strings.Contains(evs, mineSecret) || strings.Contains(evs, allSecret) || strings.Contains(evs, othersSecret) {
		t.Fatal("a token is in the store")
	}
	if strings.Contains(p.logs.String(), othersSecret) || strings.Contains(p.logs.String(), mineSecret) {
		t.Fatal("a token is in the log")
	}
}

// TestParseTokenFile: every problem of a token file is reported at once, by line; an
// unknown scope is an error, never ignored.
func TestParseTokenFile(t *testing.T) {
	const h = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	cases := []struct {
		rule, file string
		lines      []string // the lines at fault, "" when the file is fine
	}{
		{"a token with a process scope is fine", "ci " + h + " libos:process:pid_1", nil},
		{"comments and blank lines are ignored", "# x\n\nci " + h + " libos:process:* libos:operator\n", nil},
		{"a line without scopes", "ci " + h, []string{"line 1"}},
		{"operator rights alone cover no process", "ci " + h + " libos:operator", []string{"line 1"}},
		{"an unknown scope is refused", "ci " + h + " libos:process:pid_1 admin", []string{"line 1"}},
		{"the token itself instead of its hash", "ci libos_abc libos:process:*", []string{"line 1"}},
		{"an uppercase hash", "ci " + strings.ToUpper(h) + " libos:process:*", []string{"line 1"}},
		{"a duplicate id and a duplicate hash, both reported",
			"ci " + h + " libos:process:*\nci " + h + " libos:process:*\nbad/id sha256:00 x", []string{"line 2", "line 3"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			_, err := ParseTokenFile([]byte(c.file))
			if c.lines == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e, ok := liberr.As(err)
			if !ok || e.Code != codeInvalidConfig {
				t.Fatalf("err = %v, want invalid_config", err)
			}
			var at []string
			for _, d := range e.Details {
				if len(at) == 0 || at[len(at)-1] != d.Path {
					at = append(at, d.Path)
				}
			}
			if strings.Join(at, ",") != strings.Join(c.lines, ",") {
				t.Fatalf("details at %v, want %v (%v)", at, c.lines, e.Details)
			}
		})
	}
}

// TestCheckExposure: "serve --http on a non-loopback address refuses to start without
// authentication and TLS unless --insecure is given, and says so".
func TestCheckExposure(t *testing.T) {
	cases := []struct {
		addr                      string
		authenticated, tls, insec bool
		refused                   bool
	}{
		{"127.0.0.1:8765", false, false, false, false},
		{"127.0.0.2:8765", false, false, false, false},
		{"[::1]:8765", false, false, false, false},
		{"localhost:8765", false, false, false, false},
		{"0.0.0.0:8765", false, false, false, true},
		{":8765", false, false, false, true},
		{"[::]:8765", false, false, false, true},
		{"192.0.2.1:8765", false, false, false, true},
		{"192.0.2.1:8765", true, false, false, true},
		{"192.0.2.1:8765", false, true, false, true},
		{"192.0.2.1:8765", true, true, false, false},
		{"0.0.0.0:8765", false, false, true, false},
	}
	for _, c := range cases {
		err := CheckExposure(c.addr, c.authenticated, c.tls, c.insec)
		if c.refused != (err != nil) {
			t.Errorf("%s auth=%v tls=%v insecure=%v: %v, want refused=%v", c.addr, c.authenticated, c.tls, c.insec, err, c.refused)
			continue
		}
		if err != nil {
			if !errors.Is(err, liberr.New("", CodeInsecureListener, "")) || !strings.Contains(err.Error(), "--insecure") {
				t.Errorf("%s: %v, want insecure_listener naming --insecure", c.addr, err)
			}
			if !c.authenticated && !strings.Contains(err.Error(), "authentication") || !c.tls && !strings.Contains(err.Error(), "TLS") {
				t.Errorf("%s: %v does not say what is missing", c.addr, err)
			}
		}
	}
}

// TestNewAuthorizerConfig: an unusable configuration is an invalid_config error, at
// start, not a server that refuses everyone.
func TestNewAuthorizerConfig(t *testing.T) {
	for _, c := range []struct {
		rule string
		cfg  AuthConfig
	}{
		{"nothing to authenticate with", AuthConfig{}},
		{"an issuer that is not a URL", AuthConfig{OAuth: &OAuthConfig{Issuer: "auth.example", Audience: "https://h/mcp"}}},
		{"no audience", AuthConfig{OAuth: &OAuthConfig{Issuer: "https://auth.example"}}},
		{"a relative audience", AuthConfig{OAuth: &OAuthConfig{Issuer: "https://auth.example", Audience: "/mcp"}}},
		{"a JWKS URL that is not http(s)", AuthConfig{OAuth: &OAuthConfig{Issuer: "https://auth.example", Audience: "https://h/mcp", JWKSURL: "file:///etc/keys"}}},
	} {
		if _, err := NewAuthorizer(c.cfg); !errors.Is(err, liberr.New("", codeInvalidConfig, "")) {
			t.Errorf("%s: %v, want invalid_config", c.rule, err)
		}
	}
}

// BenchmarkAuthenticate: the cost authorization adds to every HTTP request, for a
// static token (one SHA-256 and a map lookup) and for an ES256 access token (parse,
// signature check against the cached JWKS, claims).
func BenchmarkAuthenticate(b *testing.B) {
	is := newIssuerB(b)
	secret, line, err := NewToken("ci", []string{ScopeAllProcesses})
	if err != nil {
		b.Fatal(err)
	}
	toks, _ := ParseTokenFile([]byte(line))
	const aud = "https://mcp.example/mcp"
	a, err := NewAuthorizer(AuthConfig{Tokens: toks, OAuth: &OAuthConfig{Issuer: is.url, Audience: aud}})
	if err != nil {
		b.Fatal(err)
	}
	jwtTok := is.mint(b, grant{kid: "k1", iss: is.url, sub: "alice", aud: []string{aud}, scope: ScopeAllProcesses, exp: time.Hour})
	for _, c := range []struct{ name, token string }{{"static", secret}, {"jwt", jwtTok}} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+c.token)
			for b.Loop() {
				if _, err := a.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A static token kept to its file: the look at the file once a second.
	file := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	fa, err := NewAuthorizer(AuthConfig{TokenFile: file})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("static-file", func(b *testing.B) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		for b.Loop() {
			if _, err := fa.Authenticate(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What auditing an admission adds: counted (what the server does), and recorded
	// one synced event per request (what it does not, for this cost).
	ctx := context.Background()
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k, err := engine.Open(ctx, st, engine.Config{Builtins: []engine.Tool{tools.Echo()}})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	pid, err := k.Spawn(ctx, engine.ProcessConfig{Tools: []string{"echo"}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(k, pid, Options{Name: "bench", Version: "1", Auth: a})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	p, err := a.Authenticate(r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("audit-counted", func(b *testing.B) {
		for b.Loop() {
			s.audit(ctx, r, p, true, nil)
		}
	})
	b.Run("audit-per-request", func(b *testing.B) {
		acc := engine.Access{Granted: true, Method: p.Method, Subject: p.Subject, Scopes: p.Scopes, Via: "mcp-http"}
		for b.Loop() {
			if err := k.RecordAccess(ctx, pid, acc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTokenFileReload: the server keeps to its token file while it runs ("revoked
// tokens stop working, new ones start"): a changed file is read again on a request
// after TokenCheck and at once on ReloadTokens; a file that became invalid or
// unreadable changes nothing and is reported.
func TestTokenFileReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	var aSecret, aLine, bSecret, bLine string
	p := serveProtected(t, func(pid, _ string) AuthConfig {
		var err error
		if aSecret, aLine, err = NewToken("a", []string{ProcessScope(pid)}); err != nil {
			t.Fatal(err)
		}
		if bSecret, bLine, err = NewToken("b", []string{ProcessScope(pid)}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(aLine+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return AuthConfig{TokenFile: file, TokenCheck: time.Millisecond}
	})
	status := func(secret string) int { return post(t, p.url, "Bearer "+secret).status }
	if a, b := status(aSecret), status(bSecret); a != http.StatusOK || b != http.StatusUnauthorized {
		t.Fatalf("before the change: a %d, b %d; want 200, 401", a, b)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// a is revoked and b issued by editing the file: the next request after
	// TokenCheck finds the change (no restart, no signal).
	write("# a revoked\n" + bLine + "\n")
	for i := 0; i < 500 && status(aSecret) != http.StatusUnauthorized; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if a, b := status(aSecret), status(bSecret); a != http.StatusUnauthorized || b != http.StatusOK {
		t.Fatalf("after revoking a and adding b: a %d, b %d; want 401, 200", a, b)
	}

	// A file that became invalid, then one that is gone, changes nothing: the tokens
	// last read stay, and the log says why.
	write(bLine + "\nthis line is no token\n")
	if err := p.s.auth.ReloadTokens(); !errors.Is(err, liberr.New("", codeInvalidConfig, "")) {
		t.Fatalf("reloading an invalid file: %v, want invalid_config", err)
	}
	_ = os.Remove(file)
	if err := p.s.auth.ReloadTokens(); !errors.Is(err, liberr.New("", codeInvalidConfig, "")) {
		t.Fatalf("reloading a missing file: %v, want invalid_config", err)
	}
	if a, b := status(aSecret), status(bSecret); a != http.StatusUnauthorized || b != http.StatusOK {
		t.Fatalf("after an invalid and a missing file: a %d, b %d; want 401, 200", a, b)
	}
	if !strings.Contains(p.logs.String(), "the token file was not reloaded") {
		t.Fatalf("the failed reload is not in the log:\n%s", p.logs.String())
	}

	// ReloadTokens (what SIGHUP does in 'libos serve') applies a change at once.
	write(aLine + "\n")
	if err := p.s.auth.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	if a, b := status(aSecret), status(bSecret); a != http.StatusOK || b != http.StatusUnauthorized {
		t.Fatalf("after ReloadTokens: a %d, b %d; want 200, 401", a, b)
	}
	if strings.Contains(p.logs.String(), aSecret) || strings.Contains(p.logs.String(), bSecret) {
		t.Fatal("a token is in the log")
	}
}

// TestAccessDecisionsAudited: "every capability decision is audited". A refusal of a
// known principal is one event per request; admissions, and refusals before any
// principal is known, are counted per key and recorded together (the first at once,
// the rest a minute later or when the server flushes), so the counts in the log add
// up to every decision taken.
func TestAccessDecisionsAudited(t *testing.T) {
	var mine, other string
	p := serveProtected(t, func(pid, _ string) AuthConfig {
		var lines [2]string
		var err error
		if mine, lines[0], err = NewToken("mine", []string{ProcessScope(pid)}); err != nil {
			t.Fatal(err)
		}
		if other, lines[1], err = NewToken("other", []string{ProcessScope("pid_other")}); err != nil {
			t.Fatal(err)
		}
		toks, err := ParseTokenFile([]byte(lines[0] + "\n" + lines[1]))
		if err != nil {
			t.Fatal(err)
		}
		return AuthConfig{Tokens: toks}
	})
	sent := map[string]int{}
	send := func(authz string, n int, want int) {
		t.Helper()
		for range n {
			if r := post(t, p.url, authz); r.status != want {
				t.Fatalf("%q: %d, want %d", authz, r.status, want)
			}
		}
		sent[authz] += n
	}
	// counts sums the count of the events of typ by method and subject.
	counts := func(typ string) (map[string]float64, int) {
		evs := eventsOf(t, p.k, p.pid, typ)
		out := map[string]float64{}
		for _, e := range evs {
			out[e["method"].(string)+" "+e["subject"].(string)] += e["count"].(float64)
		}
		return out, len(evs)
	}
	send("Bearer "+mine, 5, http.StatusOK)
	send("Bearer "+other, 3, http.StatusForbidden)
	send("", 4, http.StatusUnauthorized)

	// At once: the first admission, every refusal of the known principal, the first
	// anonymous refusal.
	granted, n := counts(engine.EventClientAuthorized)
	if n != 1 || granted["token mine"] != 1 {
		t.Fatalf("client_authorized before the flush: %v in %d events, want mine's first", granted, n)
	}
	refused, n := counts(engine.EventClientRefused)
	if n != 4 || refused["token other"] != 3 || refused["none "] != 1 {
		t.Fatalf("client_refused before the flush: %v in %d events, want other's three and the first anonymous one", refused, n)
	}

	// A key whose last record is a minute old is recorded with the next decision.
	p.s.authMu.Lock()
	for _, tl := range p.s.tallies {
		tl.last = tl.last.Add(-2 * accessEvery)
	}
	p.s.authMu.Unlock()
	send("Bearer "+mine, 1, http.StatusOK)
	if granted, n = counts(engine.EventClientAuthorized); n != 2 || granted["token mine"] != 6 {
		t.Fatalf("client_authorized a minute on: %v in %d events, want 1 then 5", granted, n)
	}

	// The flush records the rest: the counts add up to every decision.
	send("Bearer "+mine, 2, http.StatusOK)
	p.s.FlushAccess(context.Background())
	granted, _ = counts(engine.EventClientAuthorized)
	refused, _ = counts(engine.EventClientRefused)
	if granted["token mine"] != float64(sent["Bearer "+mine]) || refused["token other"] != float64(sent["Bearer "+other]) || refused["none "] != float64(sent[""]) {
		t.Fatalf("after the flush: granted %v, refused %v; sent %v", granted, refused, sent)
	}
	for _, e := range eventsOf(t, p.k, p.pid, engine.EventClientAuthorized) {
		if e["count"].(float64) > 1 && e["since"] == nil {
			t.Errorf("an event of several decisions does not say since when: %v", e)
		}
	}
	if evs := allEvents(t, p.k, p.pid); strings.Contains(evs, mine) || strings.Contains(evs, other) {
		t.Fatal("a token is in the store")
	}
}
