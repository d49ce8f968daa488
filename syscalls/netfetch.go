package syscalls

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/regfile"
	"github.com/agentlibos/libos/liberr"
)

// Resolver looks host names up; *net.Resolver is one. Tests and embedders with their
// own DNS inject another.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// netFetch reaches outside the store: the router syncs what led to it before it runs.
var netFetch = provider{name: "net", run: runNetFetch, external: true}

// fetchPlan is what the policy stage decided about a fetch, handed to the provider.
type fetchPlan struct {
	first   target
	method  string
	headers [][2]string // as the guest wrote them, placeholders unreplaced
	body    []byte
}

// auditNet is what the audit log keeps of a fetch: never bodies, header values or
// secret values.
type auditNet struct {
	Method        string `json:"method"`
	Host          string `json:"host"` // canonical host:port of the last request
	Path          string `json:"path"`
	Address       string `json:"address,omitempty"` // the vetted address connected to
	Status        int    `json:"status,omitempty"`
	RequestBytes  int    `json:"request_bytes"`
	ResponseBytes int64  `json:"response_bytes"`
	Redirects     int    `json:"redirects,omitempty"`
	Secrets       string `json:"secrets,omitempty"` // names substituted on any request, never values
	// Hops are the requests of the fetch in order, the first included: each redirect
	// followed is one more, also when it was refused before being sent.
	Hops []auditHop `json:"hops,omitempty"`
}

// auditHop is one request of a fetch.
type auditHop struct {
	Method  string `json:"method"`
	Host    string `json:"host"` // canonical host:port
	Path    string `json:"path"`
	Address string `json:"address,omitempty"` // the vetted address connected to
	Status  int    `json:"status,omitempty"`
	Secrets string `json:"secrets,omitempty"` // names substituted, never values
}

// hopHeaders may not be set by a guest: they belong to the transport, and letting a
// guest choose them would let it speak to something other than the vetted host.
var hopHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Upgrade": true, "Expect": true,
}

var headerToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$") })

// placeholder is a secret reference in a header value.
var placeholder = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{secret:([^{}]*)\}\}`) })

func netErr(code liberr.Code, msg string) *Error { return errorf(code, "net.fetch: "+msg, nil) }

// checkFetch is the policy stage of net.fetch: everything that can be decided before
// any byte leaves — the image grants egress, the URL parses strictly, its host and the
// method are allowed, the body fits, the headers are the guest's to set, and every
// secret placeholder names a secret that may go to this host.
func checkFetch(c *call) error {
	pol := c.caller.Policy
	if pol == nil || pol.net == nil {
		return netErr(CodeHostNotAllowed, "this image grants no egress; every fetch is refused")
	}
	n := pol.net
	t, err := parseTarget(c.str("url"))
	if err != nil {
		return netErr(CodeURLInvalid, err.Error())
	}
	method := c.str("method")
	if method == "" {
		method = "GET"
	}
	c.ev.Net = &auditNet{Method: method, Host: t.authority(), Path: t.path}
	if !hostAllowed(n.allow, t) {
		return netErr(CodeHostNotAllowed, fmt.Sprintf("host %s is not in the image's allow-list", t.authority()))
	}
	if !n.methods[method] {
		return netErr(CodeMethodNotAllowed, fmt.Sprintf("method %s is not allowed by the image (allowed: %s)", method, strings.Join(sortedNames(n.methods), ", ")))
	}
	var body []byte
	if b, ok := c.args["body"].(string); ok {
		if c.str("body_encoding") == "base64" {
			body, err = base64.StdEncoding.DecodeString(b)
			if err != nil {
				return argErr(c, "body is not standard base64")
			}
		} else {
			body = []byte(b)
		}
	}
	if int64(len(body)) > n.maxRequest {
		return netErr(CodeRequestTooLarge, fmt.Sprintf("the request body is %d bytes; the image allows %d", len(body), n.maxRequest))
	}
	if len(body) > 0 && (method == "GET" || method == "HEAD") {
		return argErr(c, method+" takes no body")
	}
	if placeholder().Match(body) || placeholder().MatchString(t.url) {
		return netErr(CodeSecretNotAllowed, "secret placeholders are replaced only in header values, never in the URL or the body")
	}
	hdrs, _ := c.args["headers"].(map[string]any)
	plan := &fetchPlan{first: t, method: method, body: body}
	seen := map[string]bool{}
	for _, k := range sortedNames(hdrs) {
		v, _ := hdrs[k].(string)
		canon := http.CanonicalHeaderKey(k)
		switch {
		case !headerToken().MatchString(k):
			return argErr(c, fmt.Sprintf("header name %q is not an HTTP token", liberr.Clip(k, 64)))
		case hopHeaders[canon]:
			return argErr(c, fmt.Sprintf("header %s is set by the host, not the guest", canon))
		case seen[canon]:
			return argErr(c, fmt.Sprintf("header %s is given twice (names are case-insensitive)", canon))
		case hasControl(v) || !utf8.ValidString(v):
			return argErr(c, fmt.Sprintf("header %s has a value with a control character (CR, LF, NUL, another C0 or DEL) or invalid UTF-8", canon))
		}
		seen[canon] = true
		plan.headers = append(plan.headers, [2]string{canon, v})
	}
	if _, err := pol.substitute(plan.headers, t, nil); err != nil {
		return err
	}
	c.ev.Net.RequestBytes = len(body)
	c.fetch = plan
	return nil
}

// hasControl reports whether s holds a control character: C0 (CR, LF, NUL, tab, …) or
// DEL. None belongs in a header value a guest or a secret supplies: CR and LF split
// the header, and the others are refused by servers in ways that differ from ours.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

func hostAllowed(allow []hostPattern, t target) bool {
	for _, p := range allow {
		if p.matches(t.host, t.port, t.scheme) {
			return true
		}
	}
	return false
}

// substitute returns the headers with every placeholder replaced by its secret's
// value, for destination t, or secret_not_allowed when a placeholder names a secret
// the image does not declare or that may not go to t. With read nil it only checks.
// used collects the names substituted.
func (p *Policy) substitute(headers [][2]string, t target, read func(*secret) (string, error)) ([][2]string, error) {
	out := make([][2]string, 0, len(headers))
	for _, h := range headers {
		v := h[1]
		var ferr error
		v = placeholder().ReplaceAllStringFunc(v, func(m string) string {
			if ferr != nil {
				return ""
			}
			name := placeholder().FindStringSubmatch(m)[1]
			s, ok := p.secrets[name]
			if !ok {
				ferr = netErr(CodeSecretNotAllowed, fmt.Sprintf("header %s names secret %q, which the image does not declare", h[0], liberr.Clip(name, 64)))
				return ""
			}
			if !hostAllowed(s.hosts, t) {
				ferr = netErr(CodeSecretNotAllowed, fmt.Sprintf("secret %s may not be sent to %s", name, t.authority()))
				return ""
			}
			if read == nil {
				return m
			}
			val, err := read(s)
			if err != nil {
				ferr = err
				return ""
			}
			return val
		})
		if ferr != nil {
			return nil, ferr
		}
		out = append(out, [2]string{h[0], v})
	}
	return out, nil
}

// readSecret reads a secret's value on the host, at the moment it is sent: the value
// is never stored, never handed to the guest and never written to a log.
func (r *Router) readSecret(s *secret) (string, error) {
	var v string
	switch {
	case s.fromEnv != "":
		val, ok := r.lookupEnv(s.fromEnv)
		if !ok || val == "" {
			return "", netErr(CodeSecretUnavailable, fmt.Sprintf("secret %s: environment variable %s is not set on the host", s.name, s.fromEnv))
		}
		v = val
	default:
		b, err := readSecretFile(s.fromFile)
		if err != nil {
			return "", netErr(CodeSecretUnavailable, fmt.Sprintf("secret %s: %v", s.name, err))
		}
		v = strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", netErr(CodeSecretUnavailable, fmt.Sprintf("secret %s: its file is empty", s.name))
		}
	}
	if hasControl(v) || !utf8.ValidString(v) {
		return "", netErr(CodeSecretUnavailable, fmt.Sprintf("secret %s: its value cannot be a header value (a control character or invalid UTF-8)", s.name))
	}
	return v, nil
}

// MaxSecretFileBytes bounds a secret's file: a secret is a token or a key, not a
// document.
const MaxSecretFileBytes = 16 << 10

// readSecretFile reads a from_file secret. It opens without blocking and checks what
// it opened, so a FIFO (which would block the fetch forever) or a device (/dev/zero,
// which would fill memory) is refused, and it reads at most MaxSecretFileBytes. Its
// errors do not name the path or say what the file system said: they reach the guest.
func readSecretFile(path string) ([]byte, error) {
	b, err := regfile.Read(path, MaxSecretFileBytes)
	var notReg *regfile.NotRegularError
	var tooLarge *regfile.TooLargeError
	switch {
	case errors.As(err, &notReg):
		return nil, errors.New("its file is not a regular file")
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("its file is larger than %d bytes", MaxSecretFileBytes)
	case err != nil:
		return nil, errors.New("its file cannot be read on the host")
	}
	return b, nil
}

// fetchResult is net.fetch's result.
type fetchResult struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	BodyEncoding string            `json:"body_encoding"`
	URL          string            `json:"url"`
}

func runNetFetch(ctx context.Context, c *call) (_ json.RawMessage, err error) {
	plan, pol := c.fetch, c.caller.Policy
	n := pol.net
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	// What the guest must not see: every secret value sent, for redaction. A server
	// that received one can echo it into anything the fetch reports: the result
	// (buildResult), the error, and the hosts and paths of the audit event.
	var values []redaction
	defer func() {
		err = redactError(err, values)
		redactNet(c.ev.Net, values)
	}()
	cur := plan.first
	var prev target // the request that redirected to cur; zero for the first
	method, body := plan.method, plan.body
	var sent []string // the names of the secrets sent on any request
	for hop := 0; ; hop++ {
		c.ev.Net.Hops = append(c.ev.Net.Hops, auditHop{Method: method, Host: cur.authority(), Path: cur.path})
		rec := &c.ev.Net.Hops[hop]
		if hop > 0 {
			c.ev.Net.Host, c.ev.Net.Path, c.ev.Net.Method, c.ev.Net.Redirects = cur.authority(), cur.path, method, hop
			c.ev.Net.Address, c.ev.Net.Status = "", 0
			if !hostAllowed(n.allow, cur) {
				return nil, c.deny(netErr(CodeHostNotAllowed, fmt.Sprintf("redirect %d goes to %s, which is not in the image's allow-list", hop, cur.authority())))
			}
			if !n.methods[method] {
				return nil, c.deny(netErr(CodeMethodNotAllowed, fmt.Sprintf("redirect %d would use method %s, which the image does not allow", hop, method)))
			}
		}
		if err := c.flowToHost(cur); err != nil {
			return nil, c.deny(err)
		}
		var used []string
		headers, err := pol.substitute(plan.headers, cur, func(s *secret) (string, error) {
			v, err := c.router.readSecret(s)
			if err == nil {
				values = append(values, redaction{value: v, name: s.name})
				used = append(used, s.name)
			}
			return v, err
		})
		if err != nil {
			return nil, c.deny(err)
		}
		if len(used) > 0 {
			sort.Strings(used)
			rec.Secrets = strings.Join(slicesCompact(used), ",")
			sent = append(sent, used...)
			sort.Strings(sent)
			c.ev.Net.Secrets = strings.Join(slicesCompact(sent), ",")
		}
		addrs, err := c.router.vet(ctx, n, cur)
		if err != nil {
			return nil, c.deny(err)
		}
		if len(used) > 0 {
			if err := clearTextSecrets(cur, prev, addrs, used); err != nil {
				return nil, c.deny(err)
			}
		}
		resp, addr, err := c.router.send(ctx, addrs, cur, method, headers, body, n)
		if addr.IsValid() {
			c.ev.Net.Address = netip.AddrPortFrom(addr, uint16(cur.port)).String()
			rec.Address = c.ev.Net.Address
		}
		if err != nil {
			return nil, fetchFailure(ctx, err, values)
		}
		c.ev.Net.Status, rec.Status = resp.StatusCode, resp.StatusCode
		c.noteLabels(pol.hostLabels(cur))
		if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" {
			resp.Body.Close()
			if hop >= n.maxRedirects {
				return nil, c.deny(netErr(CodeTooManyRedirects, fmt.Sprintf("the response is redirect %d; the image allows %d", hop+1, n.maxRedirects)))
			}
			next, err := resolveRedirect(cur, loc)
			if err != nil {
				return nil, c.deny(netErr(CodeURLInvalid, "redirect: "+err.Error()))
			}
			if resp.StatusCode == 303 || (resp.StatusCode == 301 || resp.StatusCode == 302) && method != "GET" && method != "HEAD" {
				method, body = "GET", nil
			}
			prev, cur = cur, next
			continue
		}
		defer resp.Body.Close()
		if resp.ContentLength > n.maxResponse {
			return nil, c.deny(netErr(CodeResponseTooLarge, fmt.Sprintf("the response declares %d bytes; the image allows %d", resp.ContentLength, n.maxResponse)))
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, n.maxResponse+1))
		c.ev.Net.ResponseBytes = int64(len(data))
		if int64(len(data)) > n.maxResponse {
			return nil, c.deny(netErr(CodeResponseTooLarge, fmt.Sprintf("the response is more than %d bytes, which the image allows", n.maxResponse)))
		}
		if err != nil {
			return nil, fetchFailure(ctx, err, values)
		}
		return json.Marshal(buildResult(resp, data, cur, values))
	}
}

// clearTextSecrets refuses to send secrets (names used) to t over plain http unless
// every address it may connect to (addrs, vetted) is loopback, and never on a
// redirect from https: a secret leaves the host in clear text only to the host
// itself. prev is the request that redirected to t, zero for the first.
func clearTextSecrets(t, prev target, addrs []netip.Addr, used []string) error {
	if t.scheme != "http" {
		return nil
	}
	names := strings.Join(slicesCompact(used), ", ")
	if prev.scheme == "https" {
		return netErr(CodeSecretNotAllowed, fmt.Sprintf("a redirect from https goes to plain http (%s); secret %s is not sent in clear text", t.authority(), names))
	}
	for _, a := range addrs {
		if !a.IsLoopback() {
			return netErr(CodeSecretNotAllowed, fmt.Sprintf("secret %s would go over plain http to %s, which is not a loopback address; use https", names, a))
		}
	}
	return nil
}

func slicesCompact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}

// fetchFailure turns a transport error into a typed one. Its cause stays on the host,
// with every secret value scrubbed from its text.
func fetchFailure(ctx context.Context, err error, values []redaction) error {
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	cause := errors.New(redactString(err.Error(), values))
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return errorf(CodeFetchTimeout, "net.fetch: no complete response within the fetch's time limit", cause)
	}
	return errorf(CodeFetchFailed, "net.fetch: the request failed (connection or protocol error)", cause)
}

// vet resolves t's host once and keeps only the addresses the image allows: public
// ones, and the non-public ones it names exactly. The connection is then made to one of
// these very addresses, never to the name, so a second resolution cannot swap them.
func (r *Router) vet(ctx context.Context, n *netPolicy, t target) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if t.ip.IsValid() {
		addrs = []netip.Addr{t.ip}
	} else {
		found, err := r.resolver.LookupNetIP(ctx, "ip", t.host)
		if err != nil || len(found) == 0 {
			if ctx.Err() != nil {
				return nil, errorf(CodeFetchTimeout, "net.fetch: name resolution did not finish within the fetch's time limit", err)
			}
			return nil, errorf(CodeFetchFailed, fmt.Sprintf("net.fetch: host %s does not resolve", t.host), err)
		}
		addrs = found
	}
	var ok []netip.Addr
	var refused []string
	for _, a := range addrs {
		a = a.Unmap()
		if class := addressClass(a); class != "" && !n.addresses[a.String()] {
			refused = append(refused, a.String()+" ("+class+")")
			continue
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		return nil, netErr(CodeAddressNotAllowed, fmt.Sprintf("host %s resolves to %s, which the image does not allow (name the exact address in net.allow_addresses to allow it)", t.host, strings.Join(refused, ", ")))
	}
	return ok, nil
}

// send makes one request to one of the vetted addresses, without following redirects
// and without any proxy. It returns the address it connected to.
func (r *Router) send(ctx context.Context, addrs []netip.Addr, t target, method string, headers [][2]string, body []byte, n *netPolicy) (*http.Response, netip.Addr, error) {
	var connected netip.Addr
	dialer := &net.Dialer{
		// The last word on the address: whatever dialled it, the socket's peer must be
		// one of the vetted addresses.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: not an address", address)
			}
			for _, a := range addrs {
				if ap.Addr().Unmap() == a && int(ap.Port()) == t.port {
					return nil
				}
			}
			return fmt.Errorf("dial %s: not a vetted address", address)
		},
	}
	tr := &http.Transport{
		Proxy: nil, // never the environment's proxy: it would choose the destination
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var last error
			for _, a := range addrs {
				conn, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(t.port)).String())
				if err == nil {
					connected = a
					return conn, nil
				}
				last = err
			}
			return nil, last
		},
		TLSClientConfig:        r.tls.Clone(),
		ForceAttemptHTTP2:      true,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
		TLSHandshakeTimeout:    n.timeout,
		ResponseHeaderTimeout:  n.timeout,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.url, rd)
	if err != nil {
		return nil, connected, err
	}
	for _, h := range headers {
		req.Header[h[0]] = []string{h[1]}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "libos-net.fetch")
	}
	resp, err := client.Do(req)
	return resp, connected, err
}

func buildResult(resp *http.Response, data []byte, t target, values []redaction) fetchResult {
	res := fetchResult{Status: resp.StatusCode, Headers: map[string]string{}, URL: redactString(t.url, values)}
	for _, k := range sortedNames(resp.Header) {
		name := redactString(strings.ToLower(k), values)
		v := redactString(strings.ToValidUTF8(strings.Join(resp.Header[k], ", "), "\uFFFD"), values)
		if prev, ok := res.Headers[name]; ok {
			// Two names that differed only by a secret's spelling.
			v = prev + ", " + v
		}
		res.Headers[name] = v
	}
	data = redactBytes(data, values)
	if utf8.Valid(data) {
		res.Body, res.BodyEncoding = string(data), "text"
	} else {
		res.Body, res.BodyEncoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return res
}

// deny marks an error found while the provider runs (after name resolution, at a
// redirect) as a refusal, not a provider failure: the audit event says denied, at
// stage egress.
func (c *call) deny(err error) error {
	var se *Error
	if errors.As(err, &se) && denialCodes[se.Code] {
		c.ev.Stage = "egress"
	}
	return err
}

// denialCodes are the codes of refusals decided by policy, wherever they happen.
var denialCodes = map[liberr.Code]bool{
	CodeHostNotAllowed: true, CodeMethodNotAllowed: true, CodeAddressNotAllowed: true,
	CodeURLInvalid: true, CodeTooManyRedirects: true, CodeResponseTooLarge: true,
	CodeSecretNotAllowed: true, CodeSecretUnavailable: true, CodeDataFlowDenied: true,
}
