package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentlibos/libos/liberr"
)

// OAuthConfig makes the server an OAuth 2.1 resource server of one authorization
// server, as the MCP revisions' authorization section has it: access tokens are
// JWTs signed by a key of the issuer's JWKS, issued for this server (aud, RFC 8707),
// within their validity (exp required, nbf), by the issuer (iss).
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier, exactly as its tokens'
	// iss and its metadata's issuer say it.
	Issuer string
	// Audience is the canonical URI of this MCP server (https://host/mcp): the
	// resource clients ask tokens for (RFC 8707), the aud the tokens must name, and
	// the resource of the RFC 9728 metadata. Required.
	Audience string
	// JWKSURL is where the issuer's keys are. Empty: the jwks_uri of the issuer's
	// metadata (RFC 8414 oauth-authorization-server, else OpenID Connect discovery).
	JWKSURL string
	// HTTPClient fetches the metadata and the keys; nil uses a client with a
	// 10-second timeout.
	HTTPClient *http.Client
	// ClockSkew is the tolerance on exp and nbf. Zero means DefaultClockSkew; a
	// negative value means none.
	ClockSkew time.Duration
	// RefreshInterval is the least time between two fetches of the keys when a token
	// names a key the cache does not hold (a rotated key): bounded so that tokens
	// with made-up key ids cannot make the server hammer the issuer. Zero means
	// DefaultRefreshInterval; a negative value means no bound.
	RefreshInterval time.Duration
}

// Defaults of OAuthConfig.
const (
	DefaultClockSkew       = 30 * time.Second
	DefaultRefreshInterval = 30 * time.Second
	// keysMaxAge is how long fetched keys are used before they are fetched again,
	// so that a key the issuer withdrew stops being accepted.
	keysMaxAge = time.Hour
	// maxMetadataBytes bounds a metadata or JWKS document.
	maxMetadataBytes = 1 << 20
)

// signatureAlgorithms are the JWS algorithms accepted: asymmetric ones only, since
// the keys are public (an HMAC key in a JWKS would be anyone's).
var signatureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

type oauthVerifier struct {
	issuer, audience string
	metadataURL      string // RFC 9728 metadata of the resource
	metadataPath     string
	client           *http.Client
	skew             time.Duration
	refresh          time.Duration

	mu        sync.Mutex
	jwksURL   string // configured or discovered
	keys      *jose.JSONWebKeySet
	fetched   time.Time // the last successful fetch
	attempted time.Time // the last fetch, successful or not
	lastErr   error     // the last fetch's failure
}

func newOAuthVerifier(c OAuthConfig) (*oauthVerifier, error) {
	bad := func(format string, args ...any) error {
		return liberr.New(layerName, codeInvalidConfig, "oauth: "+format, args...)
	}
	iss, err := url.Parse(c.Issuer)
	if c.Issuer == "" || err != nil || iss.Host == "" || (iss.Scheme != "https" && iss.Scheme != "http") || iss.RawQuery != "" || iss.Fragment != "" {
		return nil, bad("the issuer %q is not an http(s) URL without query or fragment", c.Issuer)
	}
	aud, err := url.Parse(c.Audience)
	if c.Audience == "" || err != nil || aud.Host == "" || (aud.Scheme != "https" && aud.Scheme != "http") || aud.Fragment != "" {
		return nil, bad("the audience %q is not the absolute http(s) URI of this server (https://host/mcp)", c.Audience)
	}
	if c.JWKSURL != "" {
		if u, err := url.Parse(c.JWKSURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, bad("the JWKS URL %q is not an http(s) URL", c.JWKSURL)
		}
	}
	v := &oauthVerifier{issuer: c.Issuer, audience: c.Audience, jwksURL: c.JWKSURL, client: c.HTTPClient, skew: c.ClockSkew, refresh: c.RefreshInterval}
	v.metadataURL, v.metadataPath = metadataLocation(aud)
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	switch {
	case v.skew == 0:
		v.skew = DefaultClockSkew
	case v.skew < 0:
		v.skew = 0
	}
	switch {
	case v.refresh == 0:
		v.refresh = DefaultRefreshInterval
	case v.refresh < 0:
		v.refresh = 0
	}
	return v, nil
}

// claims are the members of an access token read besides the registered ones:
// scope (RFC 9068, space-separated), scp (an array, as some servers send it),
// client_id (RFC 9068) and azp (OpenID Connect).
type claims struct {
	Scope    string          `json:"scope"`
	Scp      json.RawMessage `json:"scp"`
	ClientID string          `json:"client_id"`
	Azp      string          `json:"azp"`
}

func (c *claims) scopes() []string {
	out := strings.Fields(c.Scope)
	var arr []string
	var one string
	if json.Unmarshal(c.Scp, &arr) == nil {
		out = append(out, arr...)
	} else if json.Unmarshal(c.Scp, &one) == nil {
		out = append(out, strings.Fields(one)...)
	}
	return out
}

// verify checks a JWT access token and returns its principal, or the typed error
// that refuses it. The message never holds the token.
func (v *oauthVerifier) verify(ctx context.Context, raw string) (*Principal, error) {
	invalid := func(format string, args ...any) error {
		return liberr.New(layerName, CodeTokenInvalid, "the access token "+format, args...)
	}
	tok, err := jwt.ParseSigned(raw, signatureAlgorithms)
	if err != nil {
		return nil, invalid("is not a JWS-signed JWT with an accepted algorithm (%s)", algNames())
	}
	if len(tok.Headers) != 1 {
		return nil, invalid("has %d signatures, want one", len(tok.Headers))
	}
	kid := tok.Headers[0].KeyID
	keys, err := v.keysFor(ctx, kid)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var extra claims
	verified := false
	for _, k := range keys {
		if !k.IsPublic() || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != tok.Headers[0].Algorithm) {
			continue // a private or encryption key, or one bound to another algorithm
		}
		if tok.Claims(k.Key, &std, &extra) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, invalid("is not signed by a key of issuer %s", v.issuer)
	}
	if std.Expiry == nil {
		return nil, invalid("has no exp: access tokens must expire")
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.audience}, Time: time.Now()}, v.skew)
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, liberr.New(layerName, CodeTokenIssuer, "the access token was issued by %q, not by %s", liberr.Clip(std.Issuer, 200), v.issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, liberr.New(layerName, CodeTokenAudience, "the access token is not for this server: its audience does not name %s (RFC 8707)", v.audience)
	case errors.Is(err, jwt.ErrExpired):
		return nil, liberr.New(layerName, CodeTokenExpired, "the access token expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, invalid("is not valid before %s", std.NotBefore.Time().UTC().Format(time.RFC3339))
	case err != nil:
		return nil, invalid("fails its claims check: %s", strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "))
	}
	known, _ := parseScopes(extra.scopes())
	client := extra.ClientID
	if client == "" {
		client = extra.Azp
	}
	return &Principal{Method: "oauth", Subject: liberr.Clip(std.Subject, 200), Issuer: v.issuer,
		ClientID: liberr.Clip(client, 200), Scopes: known, Expiry: std.Expiry.Time()}, nil
}

func algNames() string {
	var b strings.Builder
	for i, a := range signatureAlgorithms {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(a))
	}
	return b.String()
}

// keysFor returns the issuer's keys with id kid (every key when the token names
// none). The keys are cached; they are fetched again when they are older than
// keysMaxAge, or when kid is not among them (the issuer rotated its keys), but never
// twice within the refresh interval, whether the last fetch succeeded or not: tokens
// with made-up key ids, or an issuer that is down, do not turn every request into a
// request to the issuer.
func (v *oauthVerifier) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	lookup := func() []jose.JSONWebKey {
		if v.keys == nil {
			return nil
		}
		if kid == "" {
			return v.keys.Keys
		}
		return v.keys.Key(kid)
	}
	now := time.Now()
	found := lookup()
	due := v.keys == nil || now.Sub(v.fetched) > keysMaxAge || len(found) == 0
	if due && (v.attempted.IsZero() || now.Sub(v.attempted) >= v.refresh) {
		v.attempted = now
		v.lastErr = v.fetchKeys(ctx)
		// On a failure the keys already known stay in use; the failure is the issuer's.
		found = lookup()
	}
	if v.keys == nil {
		if v.lastErr != nil {
			return nil, v.lastErr
		}
		return nil, liberr.New(layerName, CodeAuthUnavailable, "oauth: the keys of issuer %s are not fetched yet", v.issuer)
	}
	if len(found) == 0 {
		return nil, liberr.New(layerName, CodeTokenInvalid, "the access token names key %q, which issuer %s does not publish", liberr.Clip(kid, 100), v.issuer)
	}
	return found, nil
}

// fetchKeys (under v.mu) discovers the JWKS URL when it is not known yet and
// fetches the key set.
func (v *oauthVerifier) fetchKeys(ctx context.Context) error {
	unavailable := func(err error, format string, args ...any) error {
		return liberr.Wrap(layerName, CodeAuthUnavailable, err, "oauth: "+format, args...)
	}
	if v.jwksURL == "" {
		u, err := v.discover(ctx)
		if err != nil {
			return unavailable(err, "cannot find the keys of issuer %s: %v", v.issuer, err)
		}
		v.jwksURL = u
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, v.jwksURL, &set); err != nil {
		return unavailable(err, "cannot fetch the keys of issuer %s: %v", v.issuer, err)
	}
	v.keys, v.fetched = &set, time.Now()
	return nil
}

// discover reads the issuer's metadata and returns its jwks_uri. It tries, in the
// order the MCP authorization section gives, RFC 8414 authorization-server metadata
// and OpenID Connect discovery, with the well-known path inserted before the
// issuer's path, then OpenID Connect's appended form. The metadata's issuer must be
// the configured one (RFC 8414 3.3).
func (v *oauthVerifier) discover(ctx context.Context) (string, error) {
	iss, _ := url.Parse(v.issuer)
	path := strings.TrimSuffix(iss.EscapedPath(), "/")
	at := func(p string) string {
		u := url.URL{Scheme: iss.Scheme, Host: iss.Host}
		u.Path = p
		return u.String()
	}
	candidates := []string{
		at("/.well-known/oauth-authorization-server" + path),
		at("/.well-known/openid-configuration" + path),
	}
	if path != "" {
		candidates = append(candidates, at(path+"/.well-known/openid-configuration"))
	}
	var errs []error
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, c, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Issuer != v.issuer {
			return "", fmt.Errorf("the metadata at %s names issuer %q, not %q", c, meta.Issuer, v.issuer)
		}
		u, err := url.Parse(meta.JWKSURI)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return "", fmt.Errorf("the metadata at %s has no usable jwks_uri", c)
		}
		return meta.JWKSURI, nil
	}
	return "", errors.Join(errs...)
}

func (v *oauthVerifier) getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, res.Status)
	}
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || (mt != "application/json" && mt != "application/jwk-set+json") {
		return fmt.Errorf("GET %s: content type %q is not JSON", u, res.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxMetadataBytes {
		return fmt.Errorf("GET %s: the document is over %d bytes", u, maxMetadataBytes)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
