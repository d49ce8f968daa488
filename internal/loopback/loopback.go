package loopback

import (
	"net"
	"strings"
)

// Host reports whether every address host can name is a loopback address. "" (every
// interface) is not; a name is resolved, since that is what the listener binds, and one
// that does not resolve is not.
func Host(host string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
