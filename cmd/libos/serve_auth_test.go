package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/mcpserver"
)

// TestServeRefusesExposedHTTP: "serve --http on a non-loopback address refuses to
// start without authentication and TLS unless --insecure is given, and says so". The
// refusal comes before the store is opened or a port bound.
func TestServeRefusesExposedHTTP(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if r := libos(t, "", "token", "new", "--id", "ci", "--scope", "libos:process:*", "--file", tokens); r.code != 0 {
		t.Fatalf("token new: %d %s", r.code, r.stderr)
	}
	cert, key := selfSigned(t, dir)
	for _, c := range []struct {
		rule string
		args []string
		want string // in the message: what is missing
	}{
		{"every interface without authentication or TLS", []string{"--http", "0.0.0.0:0"}, "without authentication and TLS"},
		{"a public address with tokens but no TLS", []string{"--http", "192.0.2.1:0", "--auth-tokens", tokens}, "without TLS"},
		{"a public address with TLS but no authentication", []string{"--http", "[::]:0", "--tls-cert", cert, "--tls-key", key}, "without authentication"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			// The command function: the error is typed.
			data := filepath.Join(t.TempDir(), "store")
			f := serveFlags{http: c.args[1]}
			for i := 2; i < len(c.args); i += 2 {
				switch c.args[i] {
				case "--auth-tokens":
					f.authTokens = c.args[i+1]
				case "--tls-cert":
					f.tlsCert, f.tlsKey = c.args[i+1], key
				}
			}
			e := &env{stdout: io.Discard, stderr: io.Discard, dataDir: data, log: slog.New(slog.DiscardHandler)}
			err := serve(context.Background(), e, f)
			if !errors.Is(err, liberr.New("", mcpserver.CodeInsecureListener, "")) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("serve = %v, want insecure_listener saying %q", err, c.want)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused serve touched the store: %v", err)
			}
			// The binary: exit 2 and the reason on stderr.
			r := libos(t, "", append([]string{"serve", "--data", data}, c.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "refusing to serve HTTP") || !strings.Contains(r.stderr, "--insecure") {
				t.Fatalf("libos serve %v: %d\n%s", c.args, r.code, r.stderr)
			}
		})
	}
	t.Run("--insecure serves anyway, and says so", func(t *testing.T) {
		// 192.0.2.1 (TEST-NET-1) is on no interface here: the check lets it through,
		// and binding it fails, so nothing is ever exposed by the test.
		r := libos(t, "", "serve", "--http", "192.0.2.1:0", "--insecure", "--data", filepath.Join(t.TempDir(), "store"))
		if strings.Contains(r.stderr, "refusing") || !strings.Contains(r.stderr, "as --insecure asks") || !strings.Contains(r.stderr, "--http 192.0.2.1:0") {
			t.Fatalf("serve --insecure: %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("authorization flags without --http are refused", func(t *testing.T) {
		r := libos(t, "", "serve", "--auth-tokens", tokens)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--auth-tokens applies to --http only") {
			t.Fatalf("%d %s", r.code, r.stderr)
		}
	})
	t.Run("a token file with a bad line is refused with the line", func(t *testing.T) {
		bad := filepath.Join(dir, "bad")
		if err := os.WriteFile(bad, []byte("ci sha256:00 libos:process:*\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := libos(t, "", "serve", "--http", "127.0.0.1:0", "--auth-tokens", bad)
		if r.code != exitUsage || !strings.Contains(r.stderr, "line 1") {
			t.Fatalf("%d %s", r.code, r.stderr)
		}
	})
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, as PEM.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "libos test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// testIssuer is an OAuth authorization server on loopback: RFC 8414 metadata and a
// JWKS of one key made in the test.
func testIssuer(t *testing.T) (url string, mint func(aud, scope string, exp time.Duration) string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, func(aud, scope string, exp time.Duration) string {
		c := jwt.Claims{Issuer: srv.URL, Subject: "alice", Audience: jwt.Audience{aud}, Expiry: jwt.NewNumericDate(time.Now().Add(exp))}
		raw, err := jwt.Signed(signer).Claims(c).Claims(map[string]any{"scope": scope}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
}

// bearerRT adds a bearer token to every request, over the given TLS trust.
type bearerRT struct {
	token string
	base  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// TestServeHTTPSAuthorized: 'libos serve --http' with TLS (a self-signed certificate
// made in the test), a static token file (hashed, made by 'libos token new') and an
// OAuth issuer on loopback: each kind of token reaches the process through the Go SDK
// client over HTTPS; no token is 401 with the resource metadata; a token of another
// process 403; the decisions are in the process's audit log and no token is in the
// log, the store or the output.
func TestServeHTTPSAuthorized(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	cert, key := selfSigned(t, dir)
	tokens := filepath.Join(dir, "tokens")
	newToken := func(id string, scopes ...string) string {
		args := []string{"token", "new", "--id", id, "--file", tokens}
		for _, s := range scopes {
			args = append(args, "--scope", s)
		}
		r := libos(t, "", args...)
		if r.code != 0 {
			t.Fatalf("token new: %d %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	all := newToken("ci", "libos:process:*")
	other := newToken("elsewhere", "libos:process:pid_00000000000000000000000000000000", "libos:operator")
	if file, _ := os.ReadFile(tokens); strings.Contains(string(file), all) || strings.Contains(string(file), other) {
		t.Fatal("the token file holds a token, not its hash")
	}
	issuer, mint := testIssuer(t)
	const audience = "https://mcp.libos.test/mcp"

	url, cmd, stderr := startHTTP(t, "--data", data, "--tls-cert", cert, "--tls-key", key, "--auth-tokens", tokens,
		"--oauth-issuer", issuer, "--oauth-audience", audience)
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("serve with TLS listens on %s", url)
	}
	pem, _ := os.ReadFile(cert)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsRT := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	defer tlsRT.CloseIdleConnections()

	connect := func(token string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "auth-e2e", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{token, tlsRT}}}, nil)
	}
	pid := spawnedPID(t, stderr)
	jwtMine := mint(audience, "libos:process:"+pid, time.Hour)
	for _, tok := range []string{all, jwtMine} {
		cs, err := connect(tok)
		if err != nil {
			t.Fatalf("connect over HTTPS with a valid token: %v", err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %+v", err, res)
		}
		_ = cs.Close()
	}

	post := func(token string) (int, string, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := (&http.Client{Transport: bearerRT{token, tlsRT}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct{ Code string }
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, e.Code, res.Header.Get("WWW-Authenticate")
	}
	const metadata = `resource_metadata="https://mcp.libos.test/.well-known/oauth-protected-resource/mcp"`
	for _, c := range []struct {
		rule, token string
		status      int
		code        string
	}{
		{"no token", "", 401, mcpserver.CodeAuthRequired},
		{"a static token of another process", other, 403, mcpserver.CodeScopeDenied},
		{"a JWT for another resource", mint("https://elsewhere.test/mcp", "libos:process:"+pid, time.Hour), 401, mcpserver.CodeTokenAudience},
		{"an expired JWT", mint(audience, "libos:process:"+pid, -time.Hour), 401, mcpserver.CodeTokenExpired},
	} {
		if st, code, challenge := post(c.token); st != c.status || code != c.code || !strings.Contains(challenge, metadata) {
			t.Errorf("%s: %d %s %q, want %d %s with %s", c.rule, st, code, challenge, c.status, c.code, metadata)
		}
	}
	// The metadata is served where the challenge points (the resource's path).
	res, err := (&http.Client{Transport: tlsRT}).Get(strings.TrimSuffix(url, "/mcp") + mcpserver.ResourceMetadataPath + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	_ = json.NewDecoder(res.Body).Decode(&meta)
	res.Body.Close()
	if meta.Resource != audience || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != issuer {
		t.Fatalf("metadata = %+v", meta)
	}
	// Plain HTTP to the TLS port is not served.
	if res, err := http.Post(strings.Replace(url, "https://", "http://", 1), "application/json", strings.NewReader("{}")); err == nil {
		res.Body.Close()
		if res.StatusCode < 400 {
			t.Fatalf("plain HTTP on the TLS port: %d", res.StatusCode)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
	r := libos(t, "", "events", pid, "--verify", "--data", data)
	if r.code != 0 {
		t.Fatalf("events --verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Every decision is accounted for: admissions counted per principal, the refusal
	// of a known principal on its own, anonymous refusals counted by code.
	admitted, refused := map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(libos(t, "", "events", pid, "--json", "--data", data).stdout), "\n") {
		var ev struct {
			Type string
			Data struct {
				Method, Subject, Code string
				Count                 float64
			}
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events --json: %v: %s", err, line)
		}
		switch ev.Type {
		case "client_authorized":
			admitted[ev.Data.Method+" "+ev.Data.Subject] += ev.Data.Count
		case "client_refused":
			refused[ev.Data.Subject+" "+ev.Data.Code] += ev.Data.Count
		}
	}
	if len(admitted) != 2 || admitted["token ci"] < 1 || admitted["oauth alice"] < 1 {
		t.Fatalf("client_authorized: %v, want the static token ci and alice's JWT", admitted)
	}
	want := map[string]float64{"elsewhere " + mcpserver.CodeScopeDenied: 1, " " + mcpserver.CodeAuthRequired: 1,
		" " + mcpserver.CodeTokenAudience: 1, " " + mcpserver.CodeTokenExpired: 1}
	if fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Fatalf("client_refused: %v, want %v", refused, want)
	}
	sig := jwtMine[strings.LastIndex(jwtMine, ".")+1:]
	for _, out := range []string{r.stdout, stderr.String()} {
		if strings.Contains(out, all) || strings.Contains(out, other) || strings.Contains(out, sig) {
			t.Fatal("a token is in the audit log or serve's log")
		}
	}
}

// TestServeReloadsTokenFile: 'libos serve --auth-tokens FILE' keeps to FILE while it
// runs: after an edit and SIGHUP, the revoked token stops working and the new one
// starts, and SIGHUP does not stop the server.
func TestServeReloadsTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	newToken := func(id string) string {
		r := libos(t, "", "token", "new", "--id", id, "--scope", "libos:process:*", "--file", tokens)
		if r.code != 0 {
			t.Fatalf("token new: %d %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	old := newToken("old")
	url, cmd, stderr := startHTTP(t, "--data", filepath.Join(dir, "store"), "--auth-tokens", tokens)
	status := func(token string) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("serve stopped answering: %v\n%s", err, stderr.String())
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if st := status(old); st != http.StatusOK {
		t.Fatalf("the token of the file at start: %d", st)
	}
	// Issue a new token (appended to the file), then revoke the old one.
	fresh := newToken("new")
	file, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(file), "\n") {
		if !strings.HasPrefix(line, "old ") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(tokens, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500 && status(old) != http.StatusUnauthorized; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if o, n := status(old), status(fresh); o != http.StatusUnauthorized || n != http.StatusOK {
		t.Fatalf("after the edit and SIGHUP: old token %d, new token %d; want 401, 200\n%s", o, n, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the token file changed") {
		t.Fatalf("serve does not say it read the token file again:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), old) || strings.Contains(stderr.String(), fresh) {
		t.Fatal("a token is in serve's log")
	}
}
