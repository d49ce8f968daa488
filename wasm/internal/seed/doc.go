// Package seed holds the sandbox guest compiled for this binary's platform at build time,
// as wazero compilation cache entries, and installs them into a cache directory that
// lacks them: a fresh CI runner's first 'libos validate' then reads machine code instead
// of compiling the guest (about half a second of CPU). 'libos cache warm' also leaves
// there the snapshot of the guest's prepared state (wasm/snapfile.go), so the seed carries
// that file too and the first run does not prepare the state either.
//
// The entries travel as one embedded file, data/seed.pack (seed.go has its format), so
// that each entry is one range of the executable: on Linux the kernel copies it from the
// executable's file into the cache directory (copy_linux.go) and the process never maps
// those 4 MB into its memory; elsewhere, or when that copy cannot be made, they are
// written from memory.
//
// It owns only those entries and their installation; it must not decide anything about
// the guest. The entries come from 'make build' (scripts/build-seeded.sh runs 'libos cache
// warm' with the unseeded binary and embeds what it wrote, under the build tag
// libos_seed); without the tag, or built by 'go install', there are none and Install does
// nothing. They go to the directory wasm.Config.CacheDir names, where wazero finds them.
//
// Nothing here is trusted beyond what wazero checks when it reads any cache entry: an
// entry's file name is wazero's key, a hash of the guest's bytes, the wazero version (its
// directory) and the CPU features of the machine that compiled it, so a seed for another
// guest, wazero or CPU is never looked up; and the machine code carries a checksum that
// wazero verifies on load; the snapshot file is checked the same way by the Engine (its
// key and checksum) before it is used. Install also writes nothing when the seed records
// a guest other than the one embedded.
package seed
