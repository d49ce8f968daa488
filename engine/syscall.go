package engine

import (
	"github.com/agentlibos/libos/syscalls"
)

// authority is the part of a call's syscall authority that the process fixes: its
// live capability set (a revocation stops the next syscall, even of a call already
// running), its journal bounds and the image's route policy, compiled once per process
// with every slot (approvals, budgets, size bounds, egress, labels, data flow). The
// router only reads them, so every call shares them.
func (p *process) authority() syscalls.Caller {
	return syscalls.Caller{
		PID:          p.pid,
		Capabilities: p.caps,
		Journal:      p.img.Limits.Journal,
		Policy:       p.policy,
	}
}

// syscallCaller is the authority call's syscalls run with, built before its handler
// runs and handed to it as Call.Syscalls: the process's (authority), the kernel as
// approver (operator-class routes wait for a durable approval bound to their exact
// arguments and to this tool's definition), the host tools for tools.call, this
// call's tool and depth. It is Deferred: the router's audit events and writes become
// durable with the call's synced settlement. A JIT tool's call also gets its call ID:
// the router journals every result its code receives.
func (k *Kernel) syscallCaller(p *process, call *Call) syscalls.Caller {
	caller := p.auth
	caller.Tool, caller.Depth = call.Tool, call.Depth
	if call.Kind == KindJIT {
		// The code of a JIT tool is replayable: its syscalls are journaled under the
		// call, so that the call can be exported as a tape.
		caller.CallID = call.CallID
	}
	// The pipeline settles every call with a synced write, so the router may defer
	// its audit events and staged writes to that sync.
	caller.Deferred = true
	caller.Approver = routeApprover{k: k, p: p, via: call.Via}
	caller.Tools = k.runtime.Tools
	return caller
}
