package image

import (
	"regexp"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentlibos/libos/syscalls"
)

// "The model-facing route documentation in images ... checked against
// syscalls.Routes() by a test that fails on drift": every route line of the default
// image's instructions names a route of the table with the table's capability, and
// every route the image's capabilities reach is documented there.
func TestDefaultImageRouteDocsMatchTheTable(t *testing.T) {
	var doc struct {
		Instructions string   `yaml:"instructions"`
		Capabilities []string `yaml:"capabilities"`
	}
	if err := yaml.Unmarshal(defaultManifest, &doc); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\s*- ([a-z]+\.[a-z_]+) .*\(([a-z]+:[a-z_]+)\)\s*$`)
	documented := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(doc.Instructions, -1) {
		documented[m[1]] = m[2]
	}
	if len(documented) == 0 {
		t.Fatal("the default image documents no route: the pattern no longer reads its instructions")
	}
	table := map[string]syscalls.Capability{}
	for _, r := range syscalls.Routes() {
		table[r.Name] = r.Capability
	}
	for name, capability := range documented {
		c, ok := table[name]
		switch {
		case !ok:
			t.Errorf("the instructions document route %s, which the route table lacks", name)
		case string(c) != capability:
			t.Errorf("the instructions say %s needs %s; the table says %s", name, capability, c)
		}
	}
	for name, c := range table {
		if slices.Contains(doc.Capabilities, string(c)) {
			if _, ok := documented[name]; !ok {
				t.Errorf("route %s (%s) is reachable with the image's capabilities but not documented in its instructions", name, c)
			}
		}
	}
}
