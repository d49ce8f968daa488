// Package liberr is the one error shape of Agent libOS: every package returns *Error,
// with a stable machine Code, the emitting Layer, a Message for people, Details as
// data and the wrapped cause.
//
// It owns the Error type, its matching rules (errors.Is compares codes, across
// layers; errors.As finds the one type whichever package made it; AsLayer finds the
// error one layer made) and the helpers every package shares (CodeOf, CodeOr, Clip).
// It must not import any other package of the module: everything imports it.
//
// Data comes from the packages that fail (store, wasm, syscalls, tools, engine) and
// goes to whoever reports the failure: the model (a tool result or a rejected
// Promise in the guest), the audit log (the code and message of an event), an MCP
// client or the operator.
package liberr
