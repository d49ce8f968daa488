// Package randid makes the module's random identifiers: a prefix naming the kind
// ("pid_", "tcand_", "run_") and 128 bits from crypto/rand in lowercase hex. Process,
// candidate, tool, call, approval and run IDs, and the tokens the MCP server and the
// demo hand out, are all made here, so they have one length, one alphabet and one
// source of randomness. Ordered makes call IDs of the same shape whose first half is a
// stamp that grows with each call, so that they sort in the order they were made.
//
// It holds no state but Ordered's last stamp and imports nothing of the module; what an ID names and where it
// is stored is its caller's business.
package randid
