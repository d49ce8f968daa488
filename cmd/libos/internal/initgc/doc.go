// Package initgc keeps the garbage collector off while the packages of the libos
// binary initialise, and gives the command its target back when it runs.
//
// Why: the binary links many libraries whose package initialisation allocates (the
// JSON-schema library compiles every draft's metaschema, protobuf registers its
// descriptors, ...), about 3 MB before main runs. With the default target the first
// collection comes in the middle of that, and its mark workers, sweeping and the
// page faults on fresh spans cost a short command (--help, version, a one-file
// validate) several milliseconds for a heap that is all still live when main starts.
//
// How: Go initialises, among the packages whose imports are ready, the one first in
// import-path order, so a package that imports only runtime/debug runs its variable
// initialisation among the first few, before any library that allocates much.
// GODEBUG=inittrace=1 shows the order.
//
// What it owns: the one switch (the collector off at initialisation) and the record
// of the target the runtime read from GOGC before it. What it must not touch: the
// choice of each command's target is cmd/libos's (root.go); an explicit GOGC in the
// environment always wins over that choice.
//
// Data: GOGC comes from the environment, read by the runtime at start; the target
// goes to runtime/debug.SetGCPercent.
package initgc
