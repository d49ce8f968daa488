package prestart

import (
	"strings"
	"testing"

	"github.com/agentlibos/libos/wasm"
)

// "for those commands it calls wasm.Prestart with the engine the command asks for (the
// compilation cache directory of --cache-dir, else the default one ...)", its first
// instance prepared only for the commands that run the sandbox at once, "... The other
// commands, --help, -h and a command line it does not understand start nothing": plan
// finds the command after the root's flags, in both spellings of a flag with a value,
// takes the last --cache-dir wherever it stands, and gives up on everything else.
func TestPlan(t *testing.T) {
	def, err := wasm.DefaultCacheDir()
	if err != nil {
		def = ""
	}
	for _, c := range []struct {
		args    string
		dir     string
		ok      bool
		prepare bool
	}{
		{"validate c.json", def, true, true},
		{"validate --cache-dir /c c.json", "/c", true, true},
		{"validate --cache-dir=/c c.json", "/c", true, true},
		{"--cache-dir /c validate c.json", "/c", true, true},
		{"--cache-dir=/a validate --cache-dir /b c.json", "/b", true, true},
		{"--data /d --log-level=debug --log-format json validate --junit out.xml dir/", def, true, true},
		{"validate --cache-dir= c.json", def, true, true},
		{"validate -- --cache-dir", def, true, true},
		{"--data validate ps", "", false, false}, // "validate" is --data's value
		{"serve --http :8080", def, true, false},
		{"--cache-dir /c call pid_x echo {}", "/c", true, true},
		{"test t.json", def, true, true},
		{"demo", def, true, false},
		{"agent --cache-dir=/c hello", "/c", true, false},
		{"replay pid_x --all", def, true, true},
		{"ps", "", false, false},
		{"events pid_x", "", false, false},
		{"tools", "", false, false},
		{"diagnose", "", false, false},
		{"cache warm", "", false, false},
		{"tape pid_x call_1", "", false, false},
		{"", "", false, false},
		{"validate --help", "", false, false},
		{"validate -h c.json", "", false, false},
		{"--help validate", "", false, false},
		{"--verbose validate c.json", "", false, false}, // not a flag of the root: cobra refuses it
		{"-- validate c.json", "", false, false},
		{"validate --cache-dir", "", false, false}, // the flag lacks its value
	} {
		cfg, prepare, ok := plan(strings.Fields(c.args))
		if ok != c.ok || (ok && (cfg.CacheDir != c.dir || cfg.MaxMemory != 0 || cfg.PoolSize != 0 || cfg.Lazy || prepare != c.prepare)) {
			t.Errorf("plan(%q) = %+v, prepare %v, %v; want CacheDir %q, prepare %v, %v", c.args, cfg, prepare, ok, c.dir, c.prepare, c.ok)
		}
	}
}
