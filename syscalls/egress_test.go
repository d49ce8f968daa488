package syscalls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/agentlibos/libos/store"
)

// loopbackServer is a real HTTP server on 127.0.0.1 that counts the requests it sees.
type loopbackServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newLoopbackServer(t testing.TB, h http.HandlerFunc) *loopbackServer {
	t.Helper()
	s := &loopbackServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// port is the server's port, as text.
func (s *loopbackServer) port() string {
	_, p, _ := strings.Cut(s.Listener.Addr().String(), ":")
	return p
}

// hostsResolver is a name service of fixed answers: what DNS would say of a name an
// attacker controls.
type hostsResolver map[string][]netip.Addr

func (h hostsResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := h[host]; ok {
		return a, nil
	}
	return nil, &netError{host}
}

type netError struct{ host string }

func (e *netError) Error() string { return "lookup " + e.host + ": no such host" }

// egress is a router with its store, and a process of one image that may fetch.
type egress struct {
	r   *Router
	s   *store.Store
	pol *Policy
	pid string
}

func newEgress(t testing.TB, cfg RouterConfig, spec PolicySpec) *egress {
	t.Helper()
	r, s := newRouter(t, cfg)
	return &egress{r: r, s: s, pol: mustPolicy(t, spec), pid: "p1"}
}

// fetch makes one net.fetch call with args and returns its result, its error and the
// one audit event the call wrote (the test fails when it wrote another number).
func (e *egress) fetch(t testing.TB, args string) (fetchResult, json.RawMessage, error, auditEvent) {
	t.Helper()
	before := 0
	if _, err := e.s.Head(e.pid); err == nil {
		before = auditCount(t, e.s, e.pid)
	}
	c := Caller{PID: e.pid, Tool: "t", Capabilities: NewCapSet(CapNetFetch), Policy: e.pol}
	raw, err := e.r.For(c).Syscall(context.Background(), "net.fetch", json.RawMessage(args))
	if n := auditCount(t, e.s, e.pid) - before; n != 1 {
		t.Fatalf("the call wrote %d audit events; every call is one", n)
	}
	var res fetchResult
	if err == nil {
		if jerr := json.Unmarshal(raw, &res); jerr != nil {
			t.Fatalf("result %s: %v", raw, jerr)
		}
	}
	return res, raw, err, lastAudit(t, e.s, e.pid)
}

// fetchArgs writes net.fetch's arguments for url and headers.
func fetchArgs(url string, headers map[string]string) string {
	a := map[string]any{"url": url}
	if headers != nil {
		a["headers"] = headers
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// TestEgressRefusesIPv6FormsOfLoopback: "loopback, link-local, private, CGNAT,
// metadata addresses refused unless the image allows that exact address", in every
// spelling: IPv4-mapped, IPv4-compatible, SIIT, NAT64, 6to4 and Teredo forms of
// 127.0.0.1, as literals and as what a name resolves to. Naming 127.0.0.1 in
// allow_addresses grants that address, not another that embeds it.
func TestEgressRefusesIPv6FormsOfLoopback(t *testing.T) {
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) })
	forms := []struct {
		literal string
		same    bool // the literal is 127.0.0.1 itself (IPv4-mapped)
	}{
		{"[::ffff:127.0.0.1]", true},
		{"[::ffff:7f00:1]", true},
		{"[0:0:0:0:0:ffff:7f00:1]", true},
		{"[::127.0.0.1]", false},
		{"[::7f00:1]", false},
		{"[::ffff:0:127.0.0.1]", false},
		{"[::ffff:0:7f00:1]", false},
		{"[64:ff9b::127.0.0.1]", false},
		{"[2002:7f00:1::]", false},
		{"[2001:0:7f00:1::1]", false},
		{"[2001:0:4136:e378:8000:63bf:80ff:fffe]", false}, // Teredo, client 127.0.0.1 obfuscated
	}
	for _, f := range forms {
		_, ip, err := canonicalHost(f.literal)
		if err != nil {
			t.Fatalf("%s: %v", f.literal, err)
		}
		// Checked first so that a build which would let one through fails here and
		// dials nothing but loopback.
		if c := addressClass(ip); c == "" {
			t.Fatalf("%s (%s) is classed public", f.literal, ip)
		}
	}
	for _, grant := range [][]string{nil, {"127.0.0.1"}} {
		for _, f := range forms {
			if grant != nil && f.same {
				continue // the very address granted
			}
			host := f.literal + ":" + srv.port()
			e := newEgress(t, RouterConfig{}, PolicySpec{Net: &NetSpec{Allow: []string{host}, AllowAddresses: grant}})
			_, _, err, ev := e.fetch(t, fetchArgs("http://"+host+"/x", nil))
			if codeOf(err) != CodeAddressNotAllowed {
				t.Fatalf("%s (allow_addresses %v): %v, want address_not_allowed", f.literal, grant, err)
			}
			if ev.Decision != "denied" || ev.Stage != "egress" || ev.Code != CodeAddressNotAllowed || ev.Net == nil || ev.Net.Address != "" {
				t.Fatalf("%s: audit %+v %+v", f.literal, ev, ev.Net)
			}
		}
	}
	// The same addresses returned by a name's lookup.
	dns := hostsResolver{}
	for i, f := range forms {
		_, ip, _ := canonicalHost(f.literal)
		dns["h"+strconv.Itoa(i)+".example"] = []netip.Addr{ip}
	}
	for name, addrs := range dns {
		host := name + ":" + srv.port()
		e := newEgress(t, RouterConfig{Resolver: dns}, PolicySpec{Net: &NetSpec{Allow: []string{host}}})
		_, _, err, ev := e.fetch(t, fetchArgs("http://"+host+"/x", nil))
		if codeOf(err) != CodeAddressNotAllowed || ev.Stage != "egress" || ev.Code != CodeAddressNotAllowed {
			t.Fatalf("%s → %v: %v, audit %+v", name, addrs, err, ev)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests", n)
	}
	// The harness reaches the server when the address is granted.
	host := "[::ffff:127.0.0.1]:" + srv.port()
	e := newEgress(t, RouterConfig{}, PolicySpec{Net: &NetSpec{Allow: []string{host}, AllowAddresses: []string{"127.0.0.1"}}})
	if res, _, err, ev := e.fetch(t, fetchArgs("http://"+host+"/x", nil)); err != nil || res.Body != "reached" || ev.Net.Address != "127.0.0.1:"+srv.port() {
		t.Fatalf("granted: %+v %v %+v", res, err, ev.Net)
	}
}

// TestEgressUnspecifiedAddressIsNoGrant: allow_addresses names exact non-public
// addresses; "0.0.0.0 or :: in allow_addresses was a hidden loopback grant" (a
// connection to the unspecified address reaches the host itself), so it, its CIDRs
// and the IPv6 forms of IPv4 that are never connected to are problems of the image.
func TestEgressUnspecifiedAddressIsNoGrant(t *testing.T) {
	bad := []string{"0.0.0.0", "::", "[::]", "0.1.2.3", "0.0.0.0/0", "0.0.0.0/8", "::/0", "::/128", "::ffff:0.0.0.0",
		"::7f00:1", "::ffff:0:7f00:1", "2001:0:7f00:1::1"}
	_, probs := CompilePolicy(PolicySpec{Net: &NetSpec{Allow: []string{"127.0.0.1:8080"}, AllowAddresses: bad}})
	at := map[string]bool{}
	for _, p := range probs {
		at[p.At] = true
	}
	for i, a := range bad {
		if !at["/net/allow_addresses/"+strconv.Itoa(i)] {
			t.Errorf("%q is not a problem: %+v", a, probs)
		}
	}
	if len(probs) != len(bad) {
		t.Errorf("%d problems for %d bad entries: %+v", len(probs), len(bad), probs)
	}
	if _, probs := CompilePolicy(PolicySpec{Net: &NetSpec{Allow: []string{"127.0.0.1:8080"}, AllowAddresses: []string{"127.0.0.1", "::1", "10.0.0.1"}}}); probs != nil {
		t.Errorf("exact addresses refused: %+v", probs)
	}
}

// TestEgressHeaderControlCharacters: "control characters (CR, LF, NUL, other C0, DEL)
// in a request header value (or name) are argument_invalid before anything is sent".
func TestEgressHeaderControlCharacters(t *testing.T) {
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {})
	e := newEgress(t, RouterConfig{}, PolicySpec{Net: &NetSpec{Allow: []string{srv.Listener.Addr().String()}, AllowAddresses: []string{"127.0.0.1"}}})
	var cases []map[string]string
	for _, c := range []string{"\r", "\n", "\r\n", "\x00", "\x01", "\x08", "\t", "\x0b", "\x1b", "\x1f", "\x7f"} {
		cases = append(cases, map[string]string{"X-Value": "a" + c + "b"}, map[string]string{"X-Na" + c + "me": "v"})
	}
	for _, h := range cases {
		_, _, err, ev := e.fetch(t, fetchArgs(srv.URL+"/", h))
		if codeOf(err) != CodeArgumentInvalid || ev.Stage != "policy" || ev.Code != CodeArgumentInvalid || ev.Decision != "denied" {
			t.Fatalf("%q: %v, audit %+v", h, err, ev)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests", n)
	}
	if _, _, err, ev := e.fetch(t, fetchArgs(srv.URL+"/", map[string]string{"X-Value": "a b ~ ü"})); err != nil || ev.Net.Status != 200 {
		t.Fatalf("a plain value: %v %+v", err, ev.Net)
	}
}

// TestEgressSecretFileMustBeRegular: "a from_file secret is read only from a regular
// file of at most 16 KiB, opened without blocking": a FIFO used to block the fetch
// forever and /dev/zero to fill memory; each is secret_unavailable before anything is
// sent, and the message names neither the path nor its contents.
func TestEgressSecretFileMustBeRegular(t *testing.T) {
	var got atomic.Value
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { got.Store(r.Header.Get("Authorization")) })
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"fifo":      fifo,
		"zero":      "/dev/zero",
		"directory": dir,
		"large":     write("large", strings.Repeat("k", MaxSecretFileBytes+1)),
		"control":   write("control", "tok\x01en\n"),
		"missing":   filepath.Join(dir, "absent"),
		"empty":     write("empty", "\n"),
	}
	good := write("good", strings.Repeat("g", MaxSecretFileBytes-1)+"\n")
	hosts := []string{srv.Listener.Addr().String()}
	spec := PolicySpec{Net: &NetSpec{Allow: hosts, AllowAddresses: []string{"127.0.0.1"}}, Secrets: map[string]SecretSpec{"GOOD": {FromFile: good, Hosts: hosts}}}
	for name, path := range files {
		spec.Secrets[strings.ToUpper(name)] = SecretSpec{FromFile: path, Hosts: hosts}
	}
	e := newEgress(t, RouterConfig{}, spec)
	for _, name := range sortedNames(files) {
		t.Run(name, func(t *testing.T) {
			_, _, err, ev := e.fetch(t, fetchArgs(srv.URL+"/", map[string]string{"Authorization": "Bearer {{secret:" + strings.ToUpper(name) + "}}"}))
			if codeOf(err) != CodeSecretUnavailable || ev.Stage != "egress" || ev.Code != CodeSecretUnavailable || ev.Decision != "denied" {
				t.Fatalf("%v, audit %+v", err, ev)
			}
			if strings.Contains(err.Error(), dir) || strings.Contains(ev.Reason, dir) {
				t.Fatalf("the refusal names the path: %v", err)
			}
			if n := srv.hits.Load(); n != 0 {
				t.Fatalf("the server saw %d requests", n)
			}
		})
	}
	_, _, err, ev := e.fetch(t, fetchArgs(srv.URL+"/", map[string]string{"Authorization": "Bearer {{secret:GOOD}}"}))
	if err != nil || got.Load() != "Bearer "+strings.Repeat("g", MaxSecretFileBytes-1) || ev.Net.Secrets != "GOOD" {
		t.Fatalf("a regular file of %d bytes: %v, sent %.20q…, audit %+v", MaxSecretFileBytes, err, got.Load(), ev.Net)
	}
}

// TestEgressSecretsNeverInClearText: "an https→http redirect carried the secret in
// clear; refuse it. A secret goes over plain http only to a loopback address." Both
// servers are on 127.0.0.1; the plain one must see no request.
func TestEgressSecretsNeverInClearText(t *testing.T) {
	var sawSecret atomic.Bool
	plain := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "s3cr3t-value") {
			sawSecret.Store(true)
		}
	})
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/landing", http.StatusFound)
	}))
	t.Cleanup(tlsSrv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	dns := hostsResolver{"mixed.example": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.1")}}
	cfg := RouterConfig{TLS: &tls.Config{RootCAs: roots}, Resolver: dns,
		LookupEnv: func(string) (string, bool) { return "s3cr3t-value", true }}
	mixed := "mixed.example:" + plain.port()
	hosts := []string{tlsSrv.Listener.Addr().String(), plain.Listener.Addr().String(), mixed}
	e := newEgress(t, cfg, PolicySpec{
		Net:     &NetSpec{Allow: hosts, AllowAddresses: []string{"127.0.0.1", "192.0.2.1"}},
		Secrets: map[string]SecretSpec{"TOKEN": {FromEnv: "TOKEN", Hosts: hosts}},
	})
	auth := map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}

	_, _, err, ev := e.fetch(t, fetchArgs(tlsSrv.URL+"/start", auth))
	if codeOf(err) != CodeSecretNotAllowed || ev.Stage != "egress" || ev.Code != CodeSecretNotAllowed || ev.Net.Redirects != 1 {
		t.Fatalf("https → http redirect with a secret: %v, audit %+v %+v", err, ev, ev.Net)
	}
	// A name with one address that is not loopback: refused before any connection
	// (the first address, 127.0.0.1, would have been dialled first).
	_, _, err, ev = e.fetch(t, fetchArgs("http://"+mixed+"/", auth))
	if codeOf(err) != CodeSecretNotAllowed || ev.Stage != "egress" || !strings.Contains(err.Error(), "192.0.2.1") {
		t.Fatalf("plain http to a name with a non-loopback address: %v, audit %+v", err, ev)
	}
	if n := plain.hits.Load(); n != 0 || sawSecret.Load() {
		t.Fatalf("the plain server saw %d requests (secret: %v)", n, sawSecret.Load())
	}
	// Without a secret the same redirect is followed; with one, plain http to
	// loopback is allowed.
	if _, _, err, ev := e.fetch(t, fetchArgs(tlsSrv.URL+"/start", nil)); err != nil || ev.Net.Status != 200 || ev.Net.Redirects != 1 {
		t.Fatalf("the redirect without a secret: %v %+v", err, ev.Net)
	}
	if _, _, err, ev := e.fetch(t, fetchArgs(plain.URL+"/", auth)); err != nil || !sawSecret.Load() || ev.Net.Secrets != "TOKEN" {
		t.Fatalf("plain http to loopback: %v %+v", err, ev.Net)
	}
}

// TestEgressAuditListsEveryHop: "every redirect hop is in the audit event of the call
// (one event per call that lists the hops)": method, host, path, the address connected
// to, the status and the secrets sent, for each request in order; a redirect refused
// before it was sent is listed without address or status, and so is the top level.
func TestEgressAuditListsEveryHop(t *testing.T) {
	b := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/c" {
			w.Write([]byte("done"))
			return
		}
		http.Redirect(w, r, "http://elsewhere.example/", http.StatusFound)
	})
	a := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
		case "/b":
			http.Redirect(w, r, b.URL+"/c", http.StatusSeeOther)
		case "/off":
			http.Redirect(w, r, b.URL+"/off", http.StatusFound)
		}
	})
	hosts := []string{a.Listener.Addr().String(), b.Listener.Addr().String()}
	e := newEgress(t, RouterConfig{LookupEnv: func(string) (string, bool) { return "tok", true }}, PolicySpec{
		Net:     &NetSpec{Allow: hosts, Methods: []string{"GET", "POST"}, AllowAddresses: []string{"127.0.0.1"}},
		Secrets: map[string]SecretSpec{"TOKEN": {FromEnv: "TOKEN", Hosts: hosts}},
	})
	_, _, err, ev := e.fetch(t, `{"url":"`+a.URL+`/a","method":"POST","body":"x","headers":{"Authorization":"{{secret:TOKEN}}"}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []auditHop{
		{Method: "POST", Host: hosts[0], Path: "/a", Address: hosts[0], Status: 307, Secrets: "TOKEN"},
		{Method: "POST", Host: hosts[0], Path: "/b", Address: hosts[0], Status: 303, Secrets: "TOKEN"},
		{Method: "GET", Host: hosts[1], Path: "/c", Address: hosts[1], Status: 200, Secrets: "TOKEN"},
	}
	if n := ev.Net; !slices.Equal(n.Hops, want) || n.Redirects != 2 || n.Host != hosts[1] || n.Path != "/c" || n.Status != 200 || n.Secrets != "TOKEN" {
		t.Fatalf("audit net %+v, want hops %+v", n, want)
	}

	_, _, err, ev = e.fetch(t, fetchArgs(a.URL+"/off", nil))
	if codeOf(err) != CodeHostNotAllowed || ev.Stage != "egress" {
		t.Fatalf("%v, audit %+v", err, ev)
	}
	want = []auditHop{
		{Method: "GET", Host: hosts[0], Path: "/off", Address: hosts[0], Status: 302},
		{Method: "GET", Host: hosts[1], Path: "/off", Address: hosts[1], Status: 302},
		{Method: "GET", Host: "elsewhere.example:80", Path: "/"},
	}
	if n := ev.Net; !slices.Equal(n.Hops, want) || n.Redirects != 2 || n.Host != "elsewhere.example:80" || n.Address != "" || n.Status != 0 {
		t.Fatalf("audit net %+v, want hops %+v", n, want)
	}
}

// The secrets the echo tests send, and the echo server that returns them.
const (
	echoToken = "Tok3n-Val_u.E+9" // goes in Authorization
	echoKey   = "k3yAlpha-Beta7"  // goes in X-Key; it can be a host name's label
)

// echoSpellings are the forms a server echoes a secret in: "as-is, upper/lower case,
// percent-encoded and JSON-escaped (\uXXXX) forms", and a mix of them character by
// character.
var echoSpellings = map[string]func(string) string{
	"as-is": func(s string) string { return s },
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"percent": func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
		return b.String()
	},
	"percent-lower": func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02x", s[i])
		}
		return b.String()
	},
	"json": func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	},
	"json-upper": func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04X`, r)
		}
		return b.String()
	},
	"percent-twice": func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%25%02X", s[i])
		}
		return b.String()
	},
	"form":       func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "%20", "+") },
	"base64":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"base64-url": func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
	// An Authorization: Basic header echoed: the secret at an offset of the encoding.
	"base64-basic":   func(s string) string { return base64.StdEncoding.EncodeToString([]byte("user:" + s)) },
	"base64-basic-2": func(s string) string { return base64.StdEncoding.EncodeToString([]byte("me:" + s + "!")) },
	"mixed": func(s string) string {
		var b strings.Builder
		for i, r := range s {
			switch i % 4 {
			case 0:
				b.WriteRune(r)
			case 1:
				fmt.Fprintf(&b, "%%%02X", r)
			case 2:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteString(strings.ToUpper(string(r)))
			}
		}
		return b.String()
	},
}

// echoTargets are the places a server echoes what it received into: a redirect's
// host, path or query, a response header's name or value, a JSON string of the body,
// plain body text.
var echoTargets = []string{"location-host", "location-badhost", "location-path", "location-query", "header-name", "header-value", "json-body", "text-body"}

// newEchoServer is the one secret-echoing server of the echo tests: /echo/TARGET?form=F
// spells the secrets it received (Authorization: Bearer TOKEN, X-Key: KEY) in form F
// into TARGET; /landing/… answers "landed".
func newEchoServer(t testing.TB) *loopbackServer {
	return newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/landing") {
			w.Write([]byte("landed"))
			return
		}
		spell := echoSpellings[r.URL.Query().Get("form")]
		tok, key := spell(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")), spell(r.Header.Get("X-Key"))
		switch strings.TrimPrefix(r.URL.Path, "/echo/") {
		case "location-host":
			w.Header().Set("Location", "http://"+key+".evil.example/")
			w.WriteHeader(http.StatusFound)
		case "location-badhost":
			w.Header().Set("Location", "http://"+tok+"/")
			w.WriteHeader(http.StatusFound)
		case "location-path":
			w.Header().Set("Location", "/landing/"+tok+"/"+key)
			w.WriteHeader(http.StatusFound)
		case "location-query":
			w.Header().Set("Location", "/landing?t="+tok+"&k="+key)
			w.WriteHeader(http.StatusFound)
		case "header-name":
			w.Header()[tok] = []string{"1"}
			w.Header()[key] = []string{"2"}
		case "header-value":
			w.Header().Set("X-Echo", "token="+tok+"; key="+key)
		case "json-body":
			if strings.Contains(tok, `\u`) {
				fmt.Fprintf(w, `{"token":"%s","key":["%s"]}`, tok, key)
			} else {
				b, _ := json.Marshal(map[string]any{"token": tok, "key": []string{key}})
				w.Write(b)
			}
		case "text-body":
			fmt.Fprintf(w, "token %s\nkey %s\n", tok, key)
		}
	})
}

// TestEgressEchoedSecretsAreWiped: "a secret echoed by the server into a redirect's
// host, path or query, a response header name or value, or a JSON string of the body"
// must not reach results, errors or the audit event, "in every spelling: as-is,
// upper/lower case, percent-encoded and JSON-escaped (\uXXXX) forms". Each case is one
// fetch from the shared echo server; the result, the error and the audit event of the
// call are searched for every spelling of both secrets.
func TestEgressEchoedSecretsAreWiped(t *testing.T) {
	srv := newEchoServer(t)
	host := srv.Listener.Addr().String()
	env := map[string]string{"TOKEN": echoToken, "KEY": echoKey}
	e := newEgress(t, RouterConfig{LookupEnv: func(n string) (string, bool) { v, ok := env[n]; return v, ok }}, PolicySpec{
		Net: &NetSpec{Allow: []string{host}, AllowAddresses: []string{"127.0.0.1"}},
		Secrets: map[string]SecretSpec{"TOKEN": {FromEnv: "TOKEN", Hosts: []string{host}},
			"KEY": {FromEnv: "KEY", Hosts: []string{host}}},
	})
	headers := map[string]string{"Authorization": "Bearer {{secret:TOKEN}}", "X-Key": "{{secret:KEY}}"}
	for _, target := range echoTargets {
		for _, form := range sortedNames(echoSpellings) {
			t.Run(target+"/"+form, func(t *testing.T) {
				_, raw, err, _ := e.fetch(t, fetchArgs(srv.URL+"/echo/"+target+"?form="+form, headers))
				evs, serr := e.s.Events(e.pid, 0, 0)
				if serr != nil {
					t.Fatal(serr)
				}
				seen := map[string]string{"result": string(raw), "audit event": string(evs[len(evs)-1].Data)}
				if err != nil {
					seen["error"] = err.Error()
					var se *Error
					if errors.As(err, &se) && se.Err != nil {
						seen["error's cause"] = se.Err.Error()
					}
				}
				for where, text := range seen {
					// Text quoted again (JSON in JSON, an error quoting a location)
					// doubles its backslashes: every quoting is searched.
					for q := text; strings.Contains(q, `\\`); {
						q = strings.ReplaceAll(q, `\\`, `\`)
						text += "\n" + q
					}
					for _, secret := range []string{echoToken, echoKey} {
						for name, spell := range echoSpellings {
							if strings.Contains(strings.ToLower(text), strings.ToLower(spell(secret))) {
								t.Errorf("the %s holds secret %q spelled %s:\n%s", where, secret, name, text)
							}
						}
					}
				}
				if all := seen["result"] + seen["error"] + seen["audit event"]; !strings.Contains(all, "{{secret:") && echoVisible(target, form) {
					t.Errorf("no placeholder stands for the echoed secret: %v", seen)
				}
			})
		}
	}
}

// echoVisible says whether an echo of target in form reaches what the fetch reports.
// A redirect location with a backslash is refused without quoting it, and a host with
// percent-escapes likewise; every other echo is reported, with its placeholder.
func echoVisible(target, form string) bool {
	spelled := echoSpellings[form](echoToken)
	switch target {
	case "location-host", "location-badhost":
		return !strings.ContainsAny(spelled, `\%`)
	case "location-path", "location-query":
		return !strings.Contains(spelled, `\`)
	case "header-name":
		// A server cannot send a header name with a character outside a token.
		return !strings.ContainsAny(spelled, `\/=:"(),;<>?@[]{} `)
	}
	return true
}

// TestRedactBase64AndFormSpellings: redaction reads "percent-encoded (once or more:
// "%2541"), as a form writes it ("+" for a space) ... or in base64 (a Basic
// authorization echoed, the secret at any offset of the encoded text, in the standard
// or the URL alphabet)", and a match of a base64 form takes in the characters beside it
// that carry the secret's other bits, but not the text around the encoding.
func TestRedactBase64AndFormSpellings(t *testing.T) {
	const secret = "pass word+1/ü"
	values := []redaction{{value: secret, name: "S"}}
	for _, prefix := range []string{"", "u:", "us:", "use:", "user:", "a much longer prefix:"} {
		for _, suffix := range []string{"", "!", "!!", "!!!"} {
			for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "raw-url": base64.RawURLEncoding} {
				text := enc.EncodeToString([]byte(prefix + secret + suffix))
				got := redactString("Authorization: Basic "+text+" end", values)
				if !strings.HasPrefix(got, "Authorization: Basic ") || !strings.HasSuffix(got, " end") || !strings.Contains(got, "{{secret:S}}") {
					t.Errorf("%s %q+secret+%q: %s", name, prefix, suffix, got)
					continue
				}
				// What is left of the encoding carries none of the secret's bits: the
				// characters before the placeholder end by the prefix's last bit, and
				// those after start at or past the secret's last.
				rest := strings.TrimSuffix(strings.TrimPrefix(got, "Authorization: Basic "), " end")
				before, after, _ := strings.Cut(rest, "{{secret:S}}")
				if 6*len(before) > 8*len(prefix) || 6*(len(text)-len(after)) < 8*(len(prefix)+len(secret)) {
					t.Errorf("%s %q+secret+%q: %q left beside the placeholder", name, prefix, suffix, rest)
				}
			}
		}
	}
	cases := map[string]string{
		`pass+word%2B1%2F%C3%BC`:             `{{secret:S}}`,
		`PASS%2520WORD%252B1%252F%25C3%25BC`: `{{secret:S}}`,
		`x=pass%252520word+1/%C3%BC&y=1`:     `x={{secret:S}}&y=1`,
		`%25`:                                `%25`,
		`100%25 sure`:                        `100%25 sure`,
	}
	for in, want := range cases {
		if got := redactString(in, values); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	// A value that itself looks like escapes is its own spelling too.
	odd := []redaction{{value: `%41b\u0063d%zz`, name: "O"}}
	for in, want := range map[string]string{`x %41b\u0063d%zz y`: `x {{secret:O}} y`, `%41B\U0063D%ZZ`: `{{secret:O}}`} {
		if got := redactString(in, odd); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	// A value too short for its base64 form to be its own is searched as it is only.
	short := []redaction{{value: "ab1", name: "A"}}
	if got := redactString(base64.StdEncoding.EncodeToString([]byte("ab1ab1")), short); strings.Contains(got, "{{secret") {
		t.Errorf("a 3-byte value's base64 form was wiped: %s", got)
	}
}

// TestRedactSpellings: a secret is wiped "in every spelling: as-is, upper/lower case,
// percent-encoded and JSON-escaped (\uXXXX) forms", in any mix, and only where the
// whole value is spelled.
func TestRedactSpellings(t *testing.T) {
	values := []redaction{{value: "Tok/😀", name: "T"}, {value: "ab", name: "A"}}
	cases := map[string]string{
		`x Tok/😀 y`:                       `x {{secret:T}} y`,
		`x tOK%2F\ud83d\ude00 y`:          `x {{secret:T}} y`,
		`"\u0054%6f\u006B\/%F0%9F%98%80"`: `"{{secret:T}}"`,
		`\\u0054ok/😀`:                     `{{secret:T}}`,
		`Tok/\ud83d`:                      `Tok/\ud83d`,
		`To%6`:                            `To%6`,
		`AB-%41%42-\u0061b-a`:             `{{secret:A}}-{{secret:A}}-{{secret:A}}-a`,
		`aab`:                             `a{{secret:A}}`,
	}
	for in, want := range cases {
		if got := redactString(in, values); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
