// Package modtest holds no code: its tests check that the module is a product the Go
// toolchain alone can build and use. A throwaway module outside the repository requires
// this one through a replace directive and runs a tool call end to end; a clean git
// archive of HEAD builds cmd/libos with go build only; the command cross-builds for the
// platforms make dist ships; and two builds with the release flags are byte for byte
// the same. They run with a PATH that holds only the go command and with cgo off, so
// no C compiler and no wasm toolchain can take part.
//
// It must not be imported. Data: the checkout and the Go build and module caches in;
// temporary directories out, removed afterwards.
package modtest
