package tools_test

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"testing"

	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// "The model-facing route documentation in ... Skills is generated from
// syscalls.Routes() (or checked against it by a test that fails on drift)": every
// route a Skill names (in code, in a tape, in prose) is a route of the table; every
// "`route`, which needs `capability`" says the table's capability; and every syscall
// tape a Skill shows is one NewTape accepts, that is its arguments and results match
// the routes' schemas as production's would.
func TestSkillsRouteDocsMatchTheTable(t *testing.T) {
	table := map[string]syscalls.Route{}
	for _, r := range syscalls.Routes() {
		table[r.Name] = r
	}
	named := []*regexp.Regexp{
		regexp.MustCompile(`libos\.syscall\("([^"]*)"`),
		regexp.MustCompile(`"name":\s*"([a-z]+\.[a-z_]+)"`),
		regexp.MustCompile("`([a-z]+\\.[a-z_]+)`"),
	}
	needs := regexp.MustCompile("`([a-z]+\\.[a-z_]+)`, which needs `([^`]+)`")
	fence := regexp.MustCompile("(?s)```json\n(.*?)```")
	skills := tools.SkillFS()
	paths, err := fs.Glob(skills, "*/SKILL.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Skills: %v", err)
	}
	routesNamed := 0
	for _, p := range paths {
		text, err := fs.ReadFile(skills, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range named {
			for _, m := range re.FindAllStringSubmatch(string(text), -1) {
				routesNamed++
				if _, ok := table[m[1]]; !ok {
					t.Errorf("%s names route %q, which the route table lacks", p, m[1])
				}
			}
		}
		for _, m := range needs.FindAllStringSubmatch(string(text), -1) {
			if r, ok := table[m[1]]; ok && string(r.Capability) != m[2] {
				t.Errorf("%s says %s needs %s; the table says %s", p, m[1], m[2], r.Capability)
			}
		}
		for _, m := range fence.FindAllStringSubmatch(string(text), -1) {
			var test struct {
				Syscalls json.RawMessage `json:"syscalls"`
			}
			if err := json.Unmarshal([]byte(m[1]), &test); err != nil || test.Syscalls == nil {
				continue
			}
			entries, err := syscalls.ParseTape(test.Syscalls)
			if err == nil {
				_, err = syscalls.NewTape(entries)
			}
			if err != nil {
				t.Errorf("%s shows a tape the route table refuses: %v", p, err)
			}
		}
	}
	if routesNamed == 0 {
		t.Fatal("the Skills name no route: the patterns no longer read them")
	}
}
