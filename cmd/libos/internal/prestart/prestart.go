package prestart

import (
	"os"
	"strings"

	"github.com/agentlibos/libos/wasm"
)

// Started records whether this process prestarted the sandbox. It is a variable
// initialiser rather than an init function so that it runs at this package's own turn
// in the initialisation order.
var Started = start(os.Args[1:])

func start(args []string) bool {
	cfg, prepare, ok := plan(args)
	if ok {
		wasm.Prestart(cfg, prepare)
	}
	return ok
}

// rootValueFlags are the libos command's persistent flags that take a value (root.go):
// their value is never the command's name.
var rootValueFlags = map[string]bool{"--data": true, "--log-format": true, "--log-level": true, "--cache-dir": true}

// RootValueFlags lists the flags plan skips the value of, for the test that holds the
// list to the root command's.
func RootValueFlags() []string {
	out := make([]string, 0, len(rootValueFlags))
	for f := range rootValueFlags {
		out = append(out, f)
	}
	return out
}

// eager are the commands that start the sandbox as they open, before they run anything:
// validate and test through the validator (NewValidator), serve, call, demo and agent
// through a System opened read-write (los.Open), replay through a sandbox of its own
// (newSandbox). Each asks for the engine of the compilation cache directory with the
// default memory cap, compiled at once. The others start none, or a lazy one. The value
// says whether the command runs the sandbox at once, so that its first instance is
// prepared too; a server, a demo or an agent loop waits for its first call, and an
// instance prepared for it would only add to its idle memory.
var eager = map[string]bool{"validate": true, "test": true, "call": true, "replay": true, "serve": false, "demo": false, "agent": false}

// plan reads the command line (without the program name) and returns the engine the
// command will ask for and whether to prepare its first instance (eager), or false for
// a command that starts no sandbox at once, for help, and for a command line it cannot
// read.
func plan(args []string) (cfg wasm.Config, prepare, ok bool) {
	command := ""
	cacheDir := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if command == "" {
				return wasm.Config{}, false, false
			}
			i = len(args) // the rest are candidate files
		case a == "-h" || a == "--help" || strings.HasPrefix(a, "--help="):
			return wasm.Config{}, false, false
		case strings.HasPrefix(a, "--") && strings.Contains(a, "=") && rootValueFlags[a[:strings.Index(a, "=")]]:
			if name, value, _ := strings.Cut(a, "="); name == "--cache-dir" {
				cacheDir = value
			}
		case rootValueFlags[a]:
			if i+1 >= len(args) {
				return wasm.Config{}, false, false
			}
			i++
			if a == "--cache-dir" {
				cacheDir = args[i]
			}
		case strings.HasPrefix(a, "-"):
			// Another flag: before the command it is one the command line cannot have
			// (cobra refuses it); after it, the command's own.
			if command == "" {
				return wasm.Config{}, false, false
			}
		case command == "":
			command = a
			if _, ok := eager[command]; !ok {
				return wasm.Config{}, false, false
			}
		}
	}
	if _, ok := eager[command]; !ok {
		return wasm.Config{}, false, false
	}
	if cacheDir == "" {
		// As the command does: the default directory, else no cache (compile in memory).
		cacheDir, _ = wasm.DefaultCacheDir()
	}
	return wasm.Config{CacheDir: cacheDir}, eager[command], true
}
