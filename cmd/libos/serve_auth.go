package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/mcpserver"
)

// authFlags adds the authorization and TLS flags of 'serve --http'.
func authFlags(c *cobra.Command, f *serveFlags) {
	fl := c.Flags()
	fl.StringVar(&f.authTokens, "auth-tokens", "", "with --http: accept the bearer tokens of FILE (one a line: ID sha256:HEX SCOPE...; see 'libos token new')")
	fl.StringVar(&f.oauthIssuer, "oauth-issuer", "", "with --http: accept JWT access tokens of this OAuth 2.1 authorization server (its issuer URL)")
	fl.StringVar(&f.oauthAudience, "oauth-audience", "", "with --oauth-issuer: the canonical URI of this server (https://host/mcp), the audience tokens must name")
	fl.StringVar(&f.oauthJWKS, "oauth-jwks-url", "", "with --oauth-issuer: the issuer's JWKS (default: the jwks_uri of the issuer's metadata)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "with --http: serve HTTPS with this certificate (PEM; with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "with --http: the private key of --tls-cert (PEM)")
	fl.BoolVar(&f.insecure, "insecure", false, "with --http: serve an address beyond loopback without authentication or TLS anyway")
	_ = c.MarkFlagFilename("auth-tokens")
	_ = c.MarkFlagFilename("tls-cert", "pem", "crt")
	_ = c.MarkFlagFilename("tls-key", "pem", "key")
	c.MarkFlagsRequiredTogether("tls-cert", "tls-key")
	c.MarkFlagsRequiredTogether("oauth-issuer", "oauth-audience")
}

// httpSec is what secures 'serve --http': the authorizer (nil: none) and the TLS
// configuration (nil: plain HTTP).
type httpSec struct {
	auth *mcpserver.Authorizer
	tls  *tls.Config
	what []string // for the log: which authentication
	// tokenFile is the token file auth keeps to ("" without one).
	tokenFile string
}

func (s *httpSec) describe() string {
	if len(s.what) == 0 {
		return "none"
	}
	return strings.Join(s.what, "+")
}

// httpSecurity reads the authorization and TLS flags, and refuses an address beyond
// loopback without both (mcpserver.CheckExposure) unless --insecure. Every problem is
// found before the store is opened or a port is bound.
func httpSecurity(e *env, f serveFlags) (*httpSec, error) {
	sec := &httpSec{}
	if f.http == "" {
		for name, v := range map[string]bool{
			"--auth-tokens": f.authTokens != "", "--oauth-issuer": f.oauthIssuer != "", "--oauth-audience": f.oauthAudience != "",
			"--oauth-jwks-url": f.oauthJWKS != "", "--tls-cert": f.tlsCert != "", "--tls-key": f.tlsKey != "", "--insecure": f.insecure,
		} {
			if v {
				return nil, usageErr("%s applies to --http only: stdio is the client's own pipe", name)
			}
		}
		return sec, nil
	}
	if f.oauthJWKS != "" && f.oauthIssuer == "" {
		return nil, usageErr("--oauth-jwks-url needs --oauth-issuer: the issuer is checked in every token")
	}
	cfg := mcpserver.AuthConfig{Logger: e.log}
	if f.authTokens != "" {
		data, err := os.ReadFile(f.authTokens)
		if err != nil {
			return nil, usageErr("--auth-tokens: %v", err)
		}
		if cfg.Tokens, err = mcpserver.ParseTokenFile(data); err != nil {
			return nil, usageErr("--auth-tokens %s: %w", f.authTokens, err)
		}
		if len(cfg.Tokens) == 0 {
			return nil, usageErr("--auth-tokens %s: the file lists no token (add one with 'libos token new --file %s')", f.authTokens, f.authTokens)
		}
		// The authorizer keeps to the file: it reads it again when it changes, and
		// on SIGHUP (serveHTTP).
		cfg.TokenFile = f.authTokens
		sec.tokenFile = f.authTokens
		sec.what = append(sec.what, fmt.Sprintf("%d static tokens", len(cfg.Tokens)))
	}
	if f.oauthIssuer != "" {
		cfg.OAuth = &mcpserver.OAuthConfig{Issuer: f.oauthIssuer, Audience: f.oauthAudience, JWKSURL: f.oauthJWKS}
		sec.what = append(sec.what, "oauth "+f.oauthIssuer)
	}
	if cfg.Tokens != nil || cfg.OAuth != nil {
		a, err := mcpserver.NewAuthorizer(cfg)
		if err != nil {
			return nil, usageErr("serve: %w", err)
		}
		sec.auth = a
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, usageErr("--tls-cert %s, --tls-key %s: %v", f.tlsCert, f.tlsKey, err)
		}
		sec.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if err := mcpserver.CheckExposure(f.http, sec.auth != nil, sec.tls != nil, false); err != nil {
		if !f.insecure {
			return nil, usageErr("serve: %w (authentication: --auth-tokens or --oauth-issuer; TLS: --tls-cert and --tls-key)", err)
		}
		e.log.Warn("serving beyond loopback without authentication or TLS, as --insecure asks", "addr", f.http, "auth", sec.describe(), "tls", sec.tls != nil)
	}
	return sec, nil
}
