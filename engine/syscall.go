package engine

import (
	"github.com/agentlibos/libos/syscalls"
)

// SyscallCaller is the authority this call's syscalls run with: the process's live
// capability set (a revocation stops the next syscall, even of this call), the kernel
// as approver (operator-class routes wait for a durable approval bound to their exact
// arguments and to this tool's definition), the image's route policy compiled once per
// process (every slot: approvals, budgets, size bounds, egress, labels), the host tools for tools.call, and this call's depth. It is
// Deferred: the router's audit events and writes become durable with the call's
// synced settlement. A JIT tool's call also gets its call ID and the image's journal
// bounds: the router journals every result its code receives.
func (c *Call) SyscallCaller() syscalls.Caller {
	caller := syscalls.Caller{PID: c.PID, Tool: c.Tool, Depth: c.Depth}
	if c.Kind == KindJIT {
		// The code of a JIT tool is replayable: its syscalls are journaled under the
		// call, so that the call can be exported as a tape.
		caller.CallID = c.CallID
	}
	if c.p == nil {
		caps := make([]syscalls.Capability, len(c.Capabilities))
		for i, s := range c.Capabilities {
			caps[i] = syscalls.Capability(s)
		}
		caller.Capabilities = syscalls.NewCapSet(caps...)
		return caller
	}
	caller.Capabilities = c.p.caps
	// The pipeline settles every call with a synced write, so the router may defer
	// its audit events and staged writes to that sync.
	caller.Deferred = true
	caller.Approver = routeApprover{k: c.k, p: c.p, via: c.Via}
	caller.Journal = c.p.img.Limits.Journal
	caller.Tools = c.k.runtime.Tools
	caller.Policy = c.p.policy
	return caller
}
