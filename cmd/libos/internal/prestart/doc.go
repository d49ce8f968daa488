// Package prestart starts the sandbox of the commands that need one at once ('libos
// validate', 'test', 'serve', 'call', 'demo', 'agent', 'replay') while the binary's
// packages are still initialising.
//
// Why: a process that validates a candidate spends about a third of its time in the
// initialisation of the libraries it links (the JSON-schema library compiles every
// draft's metaschema, protobuf registers its descriptors, ...) and another third
// loading the compiled guest and its prepared state; a server or a call that opens a
// store pays the same load before it answers. Neither needs the other, so on a
// machine with a second core the load can run beside the initialisation rather than
// after it.
//
// How: Go initialises, among the packages whose imports are ready, the one first in
// import-path order. This package imports only the sandbox (package wasm, which links
// wazero and the standard library), so it initialises before the heavy libraries do.
// Its variable initialisation reads the command line; for those commands it calls
// wasm.Prestart with the engine the command asks for (the compilation cache directory
// of --cache-dir, else the default one; the default memory cap; compiled at once), and
// the load begins on another goroutine. GODEBUG=inittrace=1 shows the order.
//
// What it owns: the reading of the command line for that one guess. What it must not
// own: any decision of the command. The guess is only ever a head start: the command
// takes the prestarted engine only when it asks for the same one (wasm.Prestart), so a
// wrong guess costs the work done for nothing and changes no result. The other
// commands, --help, -h and a command line it does not understand start nothing.
//
// Data: os.Args, and the environment through os.UserCacheDir.
package prestart
