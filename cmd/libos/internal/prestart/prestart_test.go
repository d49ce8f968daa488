package prestart

import (
	"strings"
	"testing"

	"github.com/agentlibos/libos/wasm"
)

// "for those commands it calls wasm.Prestart with the engine the command asks for (the
// compilation cache directory of --cache-dir, else the default one ...) ... The other
// commands, --help, -h and a command line it does not understand start nothing": plan
// finds the command after the root's flags, in both spellings of a flag with a value,
// takes the last --cache-dir wherever it stands, and gives up on everything else.
func TestPlan(t *testing.T) {
	def, err := wasm.DefaultCacheDir()
	if err != nil {
		def = ""
	}
	for _, c := range []struct {
		args string
		dir  string
		ok   bool
	}{
		{"validate c.json", def, true},
		{"validate --cache-dir /c c.json", "/c", true},
		{"validate --cache-dir=/c c.json", "/c", true},
		{"--cache-dir /c validate c.json", "/c", true},
		{"--cache-dir=/a validate --cache-dir /b c.json", "/b", true},
		{"--data /d --log-level=debug --log-format json validate --junit out.xml dir/", def, true},
		{"validate --cache-dir= c.json", def, true},
		{"validate -- --cache-dir", def, true},
		{"--data validate ps", "", false}, // "validate" is --data's value
		{"serve --http :8080", def, true},
		{"--cache-dir /c call pid_x echo {}", "/c", true},
		{"test t.json", def, true},
		{"demo", def, true},
		{"agent --cache-dir=/c hello", "/c", true},
		{"replay pid_x --all", def, true},
		{"ps", "", false},
		{"events pid_x", "", false},
		{"tools", "", false},
		{"diagnose", "", false},
		{"cache warm", "", false},
		{"tape pid_x call_1", "", false},
		{"", "", false},
		{"validate --help", "", false},
		{"validate -h c.json", "", false},
		{"--help validate", "", false},
		{"--verbose validate c.json", "", false}, // not a flag of the root: cobra refuses it
		{"-- validate c.json", "", false},
		{"validate --cache-dir", "", false}, // the flag lacks its value
	} {
		cfg, ok := plan(strings.Fields(c.args))
		if ok != c.ok || (ok && (cfg.CacheDir != c.dir || cfg.MaxMemory != 0 || cfg.PoolSize != 0 || cfg.Lazy)) {
			t.Errorf("plan(%q) = %+v, %v; want CacheDir %q, %v", c.args, cfg, ok, c.dir, c.ok)
		}
	}
}
