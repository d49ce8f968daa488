package syscalls

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// A host is compared only in one canonical form: lower-case ASCII (IDNA names in their
// xn-- form), no trailing dot, IPv4 as a dotted quad, IPv6 in brackets and compressed,
// IPv4-mapped IPv6 as the IPv4 it maps. Forms a resolver or a browser might read as an
// address but that are not a plain dotted quad ("2130706433", "0x7f.1", "127.1",
// "0177.0.0.1") are refused outright rather than interpreted.

// idnaProfile maps a Unicode name to its ASCII form the way a lookup does, and refuses
// what is not a valid domain name.
var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false), idna.StrictDomainName(true), idna.ValidateLabels(true))

// canonicalHost returns the canonical form of a host (without port) and, for an IP
// literal, its address.
func canonicalHost(h string) (string, netip.Addr, error) {
	if h == "" {
		return "", netip.Addr{}, errors.New("the host is empty")
	}
	if strings.HasPrefix(h, "[") {
		inner, ok := strings.CutSuffix(h[1:], "]")
		if !ok {
			return "", netip.Addr{}, fmt.Errorf("host %q: an IPv6 literal is closed by ]", h)
		}
		ip, err := netip.ParseAddr(inner)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("host %q is not an IPv6 address without zone", h)
		}
		ip = ip.Unmap()
		return hostOf(ip), ip, nil
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c < 0x21 || c == 0x7f || strings.IndexByte(`%@\/?#[]:`, c) >= 0 {
			return "", netip.Addr{}, fmt.Errorf("host %q contains %q", h, string(c))
		}
	}
	name := strings.TrimSuffix(h, ".")
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			ascii = false
		}
	}
	if !ascii || strings.Contains(strings.ToLower(name), "xn--") {
		a, err := idnaProfile.ToASCII(name)
		if err != nil {
			return "", netip.Addr{}, fmt.Errorf("host %q is not a valid internationalised domain name", h)
		}
		name = a
	}
	name = strings.ToLower(name)
	if name == "" || len(name) > 253 {
		return "", netip.Addr{}, fmt.Errorf("host %q is not a domain name", h)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", netip.Addr{}, fmt.Errorf("host %q has an empty or malformed label", h)
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", netip.Addr{}, fmt.Errorf("host %q: label %q has %q (letters, digits and hyphens only)", h, l, string(c))
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		ip, err := netip.ParseAddr(name)
		if err != nil || !ip.Is4() {
			return "", netip.Addr{}, fmt.Errorf("host %q is an address in an unusual form; write IPv4 as a plain dotted quad", h)
		}
		return ip.String(), ip, nil
	}
	return name, netip.Addr{}, nil
}

// numeric is true for a label that an IPv4 parser would read as a number (decimal,
// octal or hex): such a last label makes the host an address, never a name.
func numeric(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		for i := 0; i < len(rest); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(rest[i])) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func hostOf(ip netip.Addr) string {
	if ip.Is6() {
		return "[" + ip.String() + "]"
	}
	return ip.String()
}

// parsePort reads a decimal port 1..65535 without sign or leading zero.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '0' || s[0] == '+' {
		return 0, fmt.Errorf("port %q is not a number 1..65535", s)
	}
	return n, nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port". Port 0 is "none".
func splitHostPort(s string) (string, int, error) {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("host %q: an IPv6 literal is closed by ]", s)
		}
		host, port = s[:end+1], s[end+1:]
		if port != "" {
			p, ok := strings.CutPrefix(port, ":")
			if !ok {
				return "", 0, fmt.Errorf("host %q: unexpected text after ]", s)
			}
			port = p
			if port == "" {
				return "", 0, fmt.Errorf("host %q has an empty port", s)
			}
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if port == "" {
			return "", 0, fmt.Errorf("host %q has an empty port", s)
		}
	}
	if port == "" {
		return host, 0, nil
	}
	n, err := parsePort(port)
	return host, n, err
}

// hostPattern is one entry of an allow-list: a canonical host, or every name below a
// suffix, on a port (0: the scheme's default port).
type hostPattern struct {
	host     string
	wildcard bool
	port     int
}

func (p hostPattern) String() string {
	s := p.host
	if p.wildcard {
		s = "*." + s
	}
	if p.port != 0 {
		s += ":" + strconv.Itoa(p.port)
	}
	return s
}

// parseHostPattern reads an allow-list entry ("api.example.com", "*.corp.example:8443",
// "127.0.0.1:8080", "[::1]").
func parseHostPattern(s string) (hostPattern, error) {
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/@?#") {
		return hostPattern{}, fmt.Errorf("%q is not a host: write host or host:port, without scheme, user or path", s)
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return hostPattern{}, err
	}
	var p hostPattern
	p.port = port
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return hostPattern{}, fmt.Errorf("%q: a wildcard is only a leading \"*.\"", s)
	}
	c, ip, err := canonicalHost(host)
	if err != nil {
		return hostPattern{}, err
	}
	if p.wildcard && ip.IsValid() {
		return hostPattern{}, fmt.Errorf("%q: an address cannot have a wildcard", s)
	}
	if p.wildcard && !strings.Contains(c, ".") {
		return hostPattern{}, fmt.Errorf("%q: a wildcard needs a suffix of at least two labels", s)
	}
	p.host = c
	return p, nil
}

// matches reports whether the pattern allows host (canonical) on port, for scheme.
func (p hostPattern) matches(host string, port int, scheme string) bool {
	want := p.port
	if want == 0 {
		want = defaultPort(scheme)
	}
	if port != want {
		return false
	}
	if p.wildcard {
		return strings.HasSuffix(host, "."+p.host)
	}
	return host == p.host
}

// covers reports whether every destination q allows is one p allows too.
func (p hostPattern) covers(q hostPattern) bool {
	if p.port != q.port {
		return false
	}
	switch {
	case !p.wildcard && !q.wildcard:
		return p.host == q.host
	case p.wildcard && !q.wildcard:
		return strings.HasSuffix(q.host, "."+p.host)
	case p.wildcard && q.wildcard:
		return q.host == p.host || strings.HasSuffix(q.host, "."+p.host)
	}
	return false
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// target is a URL that passed the strict parse: what a fetch may go to.
type target struct {
	scheme string
	host   string // canonical, without port
	ip     netip.Addr
	port   int // always set
	url    string
	path   string // the escaped path, for the audit log (no query)
}

// authority is host:port as the allow-lists compare it.
func (t target) authority() string { return t.host + ":" + strconv.Itoa(t.port) }

// parseTarget parses a fetch URL strictly: http or https, no user information, no
// percent-escapes, spaces, backslashes or control characters in the authority, a
// canonical host and a plain port.
func parseTarget(raw string) (target, error) {
	if len(raw) > 8192 {
		return target{}, errors.New("the URL is longer than 8192 bytes")
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= 0x20 || c == 0x7f || c == '\\' {
			return target{}, fmt.Errorf("the URL contains %q; escape it", string(c))
		}
	}
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd < 0 {
		return target{}, errors.New("the URL is not absolute (scheme://host/…)")
	}
	scheme := strings.ToLower(raw[:schemeEnd])
	if scheme != "http" && scheme != "https" {
		return target{}, fmt.Errorf("scheme %q is not http or https", raw[:schemeEnd])
	}
	rest := raw[schemeEnd+3:]
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if strings.Contains(auth, "@") {
		return target{}, errors.New("the URL has user information (user@host); credentials go in headers, by secret reference")
	}
	if strings.Contains(auth, "%") {
		return target{}, errors.New("the URL's host has percent-escapes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("the URL does not parse: %v", errors.Unwrap(err))
	}
	if u.User != nil || u.Opaque != "" {
		return target{}, errors.New("the URL has user information or an opaque part")
	}
	host, port, err := splitHostPort(auth)
	if err != nil {
		return target{}, err
	}
	c, ip, err := canonicalHost(host)
	if err != nil {
		return target{}, err
	}
	if port == 0 {
		port = defaultPort(scheme)
	}
	t := target{scheme: scheme, host: c, ip: ip, port: port}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	t.path = path
	hostport := c
	if port != defaultPort(scheme) {
		hostport += ":" + strconv.Itoa(port)
	}
	t.url = scheme + "://" + hostport + path
	if u.RawQuery != "" {
		t.url += "?" + u.RawQuery
	}
	return t, nil
}

// resolveRedirect parses a Location against the URL it came from, strictly.
func resolveRedirect(from target, loc string) (target, error) {
	base, err := url.Parse(from.url)
	if err != nil {
		return target{}, err
	}
	for i := 0; i < len(loc); i++ {
		if c := loc[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return target{}, fmt.Errorf("the redirect location contains %q", string(c))
		}
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return target{}, fmt.Errorf("the redirect location does not parse")
	}
	next := base.ResolveReference(ref)
	next.Fragment, next.RawFragment = "", ""
	// The resolved location is checked exactly as the guest's own URL would be.
	return parseTarget(next.String())
}

// Address classes a fetch may not connect to unless the image names the exact address.
var deniedPrefixes = mustPrefixes([]struct{ cidr, what string }{
	{"0.0.0.0/8", "this-network"},
	{"10.0.0.0/8", "private"},
	{"100.64.0.0/10", "shared (CGNAT)"},
	{"127.0.0.0/8", "loopback"},
	{"169.254.0.0/16", "link-local (cloud metadata)"},
	{"172.16.0.0/12", "private"},
	{"192.0.0.0/24", "IETF protocol assignment"},
	{"192.0.2.0/24", "documentation"},
	{"192.88.99.0/24", "6to4 relay"},
	{"192.168.0.0/16", "private"},
	{"198.18.0.0/15", "benchmarking"},
	{"198.51.100.0/24", "documentation"},
	{"203.0.113.0/24", "documentation"},
	{"224.0.0.0/4", "multicast"},
	{"240.0.0.0/4", "reserved"},
	{"::/128", "unspecified"},
	{"::1/128", "loopback"},
	{"64:ff9b:1::/48", "local NAT64"},
	{"100::/64", "discard"},
	{"2001:db8::/32", "documentation"},
	{"fc00::/7", "unique local (private; cloud metadata)"},
	{"fe80::/10", "link-local"},
	{"ff00::/8", "multicast"},
})

// embeddingPrefixes are IPv6 ranges whose addresses carry an IPv4 address in a form
// that no public destination needs: they are refused outright, whatever IPv4 address
// they carry, and the image cannot name one in allow_addresses (it names the IPv4
// address instead). The ranges whose embedded address a public destination does use
// (the NAT64 well-known prefix, 6to4) are judged by that address (addressClass).
var embeddingPrefixes = mustPrefixes([]struct{ cidr, what string }{
	{"::/96", "IPv4-compatible (deprecated)"},
	{"::ffff:0:0:0/96", "IPv4-translated (SIIT)"},
	{"2001::/32", "Teredo"},
})

type classedPrefix struct {
	p    netip.Prefix
	what string
}

func mustPrefixes(list []struct{ cidr, what string }) []classedPrefix {
	out := make([]classedPrefix, len(list))
	for i, l := range list {
		out[i] = classedPrefix{netip.MustParsePrefix(l.cidr), l.what}
	}
	return out
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// addressClass says why ip is not public, or "" when it is. An IPv4-mapped address
// is the IPv4 address it maps; the NAT64 well-known prefix and 6to4 are judged by the
// IPv4 address they embed; the other IPv6 forms that embed one (embeddingPrefixes)
// are never public.
func addressClass(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, d := range deniedPrefixes {
		if d.p.Contains(ip) {
			return d.what
		}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64Prefix.Contains(ip):
			if c := addressClass(netip.AddrFrom4([4]byte(b[12:16]))); c != "" {
				return c + " (through NAT64)"
			}
		case sixToFour.Contains(ip):
			if c := addressClass(netip.AddrFrom4([4]byte(b[2:6]))); c != "" {
				return c + " (through 6to4)"
			}
		}
		if what := embeddingClass(ip); what != "" {
			return what + ", an IPv6 form of an IPv4 address"
		}
	}
	if ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "broadcast"
	}
	return ""
}

// parseExactAddress reads one entry of allow_addresses: a single IP, no prefix, in
// canonical form. An unspecified address (0.0.0.0/8, ::) is refused: a connection to
// it reaches the host itself, so naming it would grant loopback under another name.
// So is an IPv6 form of an IPv4 address that is refused outright (embeddingPrefixes).
func parseExactAddress(s string) (netip.Addr, error) {
	bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	ip, err := netip.ParseAddr(bare)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an exact IP address (no prefix, no zone, no name)", s)
	}
	ip = ip.Unmap()
	if ip.String() != bare {
		return netip.Addr{}, fmt.Errorf("%q: write the address in its canonical form %s", s, ip)
	}
	if ip.IsUnspecified() || netip.MustParsePrefix("0.0.0.0/8").Contains(ip) {
		return netip.Addr{}, fmt.Errorf("%q is an unspecified (this-host) address: a connection to it reaches the host's own loopback services; name the loopback address itself if that is meant", s)
	}
	if what := embeddingClass(ip); what != "" {
		return netip.Addr{}, fmt.Errorf("%q is %s, an IPv6 form of an IPv4 address that is never connected to; name the IPv4 address", s, what)
	}
	return ip, nil
}

// embeddingClass names the range of embeddingPrefixes ip is in, or "". :: and ::1 lie
// in the IPv4-compatible range but are classes of their own.
func embeddingClass(ip netip.Addr) string {
	if ip.IsUnspecified() || ip.IsLoopback() {
		return ""
	}
	for _, d := range embeddingPrefixes {
		if d.p.Contains(ip) {
			return d.what
		}
	}
	return ""
}
