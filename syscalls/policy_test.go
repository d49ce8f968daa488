package syscalls

import (
	"net/netip"
	"strings"
	"testing"
)

// TestCanonicalHosts: "the URL is parsed strictly (userinfo, IP literals in odd forms,
// IDNA, trailing dots, ports) and the host compared in canonical form".
func TestCanonicalHosts(t *testing.T) {
	ok := map[string]string{
		"http://API.Example.COM./x":          "api.example.com:80",
		"https://api.example.com/":           "api.example.com:443",
		"https://api.example.com:8443/p?q=1": "api.example.com:8443",
		"http://127.0.0.1:8080/":             "127.0.0.1:8080",
		"http://[::ffff:127.0.0.1]:8080/":    "127.0.0.1:8080",
		"http://[0:0:0:0:0:0:0:1]/":          "[::1]:80",
		"http://bücher.example/":             "xn--bcher-kva.example:80",
		"http://XN--BCHER-KVA.example/":      "xn--bcher-kva.example:80",
		"HTTPS://api.example.com:443/":       "api.example.com:443",
	}
	for raw, want := range ok {
		tg, err := parseTarget(raw)
		if err != nil || tg.authority() != want {
			t.Errorf("%s: %q %v, want %q", raw, tg.authority(), err, want)
		}
	}
	bad := []string{
		"http://0x7f.1/", "http://2130706433/", "http://0177.0.0.1/", "http://127.1/", "http://127.0.0.01/",
		"http://user@api.example.com/", "http://api.example.com@evil.example/", "http://a%2eb.example/",
		"http://api.example.com:0/", "http://api.example.com:080/", "http://api.example.com:65536/",
		"http://api.example.com:/", "ftp://api.example.com/", "//api.example.com/", "http://[fe80::1%25eth0]/",
		"http://api..example.com/", "http://-api.example.com/", "http://api_x.example.com/", "http://a b.example/",
		"http://evil.example\\@api.example.com/", "http://xn--zz.example/",
	}
	for _, raw := range bad {
		if tg, err := parseTarget(raw); err == nil {
			t.Errorf("%s: accepted as %s; want a strict refusal", raw, tg.authority())
		}
	}
}

// TestAddressClasses: "loopback, link-local, private, CGNAT, metadata addresses refused
// unless the image allows that exact address"; an IPv6 address that embeds an IPv4
// one is refused outright (IPv4-compatible, SIIT, Teredo) or judged by the address it
// embeds (NAT64's well-known prefix, 6to4).
func TestAddressClasses(t *testing.T) {
	denied := []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254",
		"0.0.0.0", "::1", "::", "fe80::1", "fd00:ec2::254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "255.255.255.255", "224.0.0.1",
		// IPv6 forms that embed an IPv4 address: IPv4-compatible, SIIT, NAT64, Teredo.
		"::7f00:1", "::127.0.0.1", "::a00:1", "::ffff:0:7f00:1", "::ffff:0:8.8.8.8", "64:ff9b::7f00:1", "2001:0:7f00:1::1", "2001:0:4136:e378:8000:63bf:80ff:fffe"}
	for _, a := range denied {
		if addressClass(netip.MustParseAddr(a)) == "" {
			t.Errorf("%s is treated as public", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1", "64:ff9b::808:808", "2002:808:808::1"} {
		if c := addressClass(netip.MustParseAddr(a)); c != "" {
			t.Errorf("%s is refused as %s", a, c)
		}
	}
}

// TestCompilePolicyListsEveryProblem: "every new image field in the image schema and its
// 'every problem at once' checks".
func TestCompilePolicyListsEveryProblem(t *testing.T) {
	two := 11
	spec := PolicySpec{
		Net: &NetSpec{Allow: []string{"http://x.example/", "*.1.2.3.4", "ok.example", "ok.example"}, Methods: []string{"get", "CONNECT"},
			Timeout: "forever", MaxRedirects: &two, MaxResponseBytes: -1, AllowAddresses: []string{"10.0.0.0/8"}},
		Secrets: map[string]SecretSpec{
			"bad name": {FromEnv: "X", Hosts: []string{"ok.example"}},
			"BOTH":     {FromEnv: "X", FromFile: "/x", Hosts: []string{"elsewhere.example"}},
			"NONE":     {},
		},
		Labels:   &LabelSpec{KV: map[string]string{"hr/*": "Confidential", "a*b": "x"}, Net: map[string]string{"user@h": "x"}},
		DataFlow: []FlowRule{{Label: "nolabel", Deny: []string{"email"}}, {Label: "x"}, {Label: "x", Deny: []string{"model"}}},
	}
	_, probs := CompilePolicy(spec)
	want := []string{"/net/allow/0", "/net/allow/1", "/net/allow/3", "/net/methods/0", "/net/methods/1", "/net/timeout",
		"/net/max_redirects", "/net/max_response_bytes", "/net/allow_addresses/0", "/secrets/bad name", "/secrets/BOTH",
		"/secrets/BOTH/hosts/0", "/secrets/NONE", "/secrets/NONE/hosts", "/labels/kv/hr~1*", "/labels/kv/a*b", "/labels/net/user@h",
		"/data_flow/0/label", "/data_flow/0/deny/0", "/data_flow/1", "/data_flow/2/label"}
	at := map[string]bool{}
	for _, p := range probs {
		at[p.At] = true
	}
	for _, w := range want {
		if !at[w] {
			t.Errorf("no problem at %s among %v", w, probs)
		}
	}
}

// TestExplainSaysItInWords: "libos images explains an image's egress, secrets and
// data-flow rules in words".
func TestExplainSaysItInWords(t *testing.T) {
	p, probs := CompilePolicy(PolicySpec{
		Net:      &NetSpec{Allow: []string{"api.example.com"}},
		Secrets:  map[string]SecretSpec{"TOKEN": {FromEnv: "TOKEN", Hosts: []string{"api.example.com"}}},
		Labels:   &LabelSpec{KV: map[string]string{"hr/*": "confidential"}},
		DataFlow: []FlowRule{{Label: "confidential", Deny: []string{"net.fetch"}}},
	})
	if probs != nil {
		t.Fatal(probs)
	}
	text := strings.Join(append(p.Explain(), p.ExplainDataFlow()...), "\n")
	for _, w := range []string{"api.example.com", "GET, HEAD", "{{secret:TOKEN}}", "environment variable TOKEN", "label confidential", `"hr/"`, "never reaches any fetch"} {
		if !strings.Contains(text, w) {
			t.Errorf("the explanation lacks %q:\n%s", w, text)
		}
	}
	var none *Policy
	if got := none.Explain(); len(got) != 1 || !strings.Contains(got[0], "refused for every host") {
		t.Errorf("no policy: %v", got)
	}
}
