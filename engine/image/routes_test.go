package image

import (
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentlibos/libos/syscalls"
)

var update = flag.Bool("update", false, "rewrite the generated route list of images/default.yaml from the route table")

// routeBlock is the generated route list in the default image's manifest: each line
// "  - <signature>" followed by its doc line, as the instructions' literal block holds
// them.
var routeBlock = regexp.MustCompile(`(?m)(?:^  - [a-z]+\.[a-z_]+ .*\n(?:    .*\n)*)+`)

// routeDocs renders the routes that caps reach, in the table's order, as the default
// image lists them.
func routeDocs(caps []string) string {
	var b strings.Builder
	for _, r := range syscalls.Routes() {
		if slices.Contains(caps, string(r.Capability)) {
			b.WriteString("  - " + r.Signature() + "\n    " + r.Doc + "\n")
		}
	}
	return b.String()
}

// "The model-facing route documentation in images is generated from
// syscalls.Routes() (or checked against it by a test that fails on drift)": the route
// list of the default image's instructions is exactly the table's signature and doc
// line of every route the image's capabilities reach, no more and no fewer.
// Regenerate it with: go test ./engine/image -run TestDefaultImageRouteDocs -update
func TestDefaultImageRouteDocsMatchTheTable(t *testing.T) {
	var doc struct {
		Instructions string   `yaml:"instructions"`
		Capabilities []string `yaml:"capabilities"`
	}
	if err := yaml.Unmarshal(defaultManifest, &doc); err != nil {
		t.Fatal(err)
	}
	blocks := routeBlock.FindAllIndex(defaultManifest, -1)
	if len(blocks) != 1 {
		t.Fatalf("images/default.yaml holds %d route lists, want 1", len(blocks))
	}
	got := string(defaultManifest[blocks[0][0]:blocks[0][1]])
	want := routeDocs(doc.Capabilities)
	if got == want {
		return
	}
	if *update {
		out := string(defaultManifest[:blocks[0][0]]) + want + string(defaultManifest[blocks[0][1]:])
		if err := os.WriteFile("images/default.yaml", []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the route list of images/default.yaml drifted from the route table; run go test ./engine/image -run TestDefaultImageRouteDocs -update\ngot:\n%s\nwant:\n%s", got, want)
}

// "Each route declares a typed policy slot that images fill": every slot a route of
// the table declares is a field of the image manifest, at the place the slot names
// (PolicySlot.Field), so an image can fill it.
func TestEverySlotIsAManifestField(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(imageSchemaText, &schema); err != nil {
		t.Fatal(err)
	}
	for _, r := range syscalls.Routes() {
		for _, s := range r.Policy {
			node := schema
			for _, part := range strings.Split(strings.TrimPrefix(s.Field(), "/"), "/") {
				props, _ := node["properties"].(map[string]any)
				next, ok := props[part].(map[string]any)
				if !ok {
					t.Fatalf("%s reads slot %s, at %s in the manifest, which the image schema has no field for", r.Name, s, s.Field())
				}
				node = next
			}
		}
	}
}
