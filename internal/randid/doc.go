// Package randid makes the module's random identifiers: a prefix naming the kind
// ("pid_", "tcand_", "run_") and 32 lowercase hex digits. Process, candidate, tool,
// call, approval and run IDs, and the tokens the MCP server and the demo hand out, are
// all made here, so they have one length, one alphabet and one source of randomness.
// New gives 128 bits from crypto/rand; Ordered, which makes call IDs, gives a stamp
// that grows with each ID this process makes followed by 64 such bits, so that call
// IDs sort in the order they were made (the store proves a new one absent from that).
//
// It holds no state but Ordered's last stamp and imports nothing of the module; what
// an ID names and where it is stored is its caller's business.
package randid
