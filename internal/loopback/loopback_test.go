package loopback

import "testing"

// Host: "every address host can name is a loopback address. "" (every interface) is
// not; a name is resolved, and one that does not resolve is not."
func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "LocalHost": true,
		"": false, "0.0.0.0": false, "::": false, "[::]": false, "10.0.0.1": false, "192.168.1.1": false,
		"2001:db8::1": false, "no-such-host.invalid": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
}
