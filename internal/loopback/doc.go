// Package loopback says whether a listener's host stays on this machine: the one test
// both listeners that must not be exposed without authentication use (the MCP server
// over HTTP, the cluster's embedded NATS server).
//
// It owns only that judgement; whether to refuse, warn or go on is the caller's. Data: a
// host as written in a listen address; a name is resolved as the listener would resolve
// it.
package loopback
