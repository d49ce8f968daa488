package engine_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

var testdataFS = os.DirFS("../testdata")

func loadImage(t testing.TB, name string) *image.Image {
	t.Helper()
	img, err := image.LoadImage(testdataFS, "images/"+name)
	if err != nil {
		t.Fatalf("LoadImage(%s): %v", name, err)
	}
	return img
}

// TestGoodImages: "an image is a versioned manifest (YAML or JSON) with name and
// version, instructions, built-in tools, Skills, capabilities, projection, limits and
// approval policy per route class".
func TestGoodImages(t *testing.T) {
	echo := loadImage(t, "echo.yaml")
	if echo.Format != image.ImageFormat || echo.Name != "echo-diagnostics" || echo.Version != "0.1.0" ||
		!strings.HasPrefix(echo.Instructions, "Use echo only") || echo.Projection != engine.Direct ||
		echo.Limits.MaxArgumentBytes != 4096 || echo.Limits.MaxCalls != 100 ||
		!slices.Equal(echo.Tools, []string{"echo", "activate_skill"}) || !slices.Equal(echo.Capabilities, []string{"clock:now"}) {
		t.Fatalf("echo.yaml = %+v", echo)
	}
	if len(echo.Skills) != 1 || echo.Skills[0].Name != "echo-check" || !slices.Equal(echo.Skills[0].AllowedTools, []string{"echo"}) ||
		!strings.HasPrefix(echo.Skills[0].Instructions, "# Echo check") {
		t.Fatalf("echo.yaml Skills = %+v", echo.Skills)
	}

	auth := loadImage(t, "authoring.json") // the JSON form
	if auth.Projection != engine.Multiplexed || auth.Version != "2.0.0-rc.1" || len(auth.Skills) != 2 ||
		auth.Limits.Sandbox.WallTimeMillis != 1000 || auth.Limits.Sandbox.MemoryBytes != 16<<20 ||
		auth.Limits.SyscallBudgets["kv.put"] != 20 || auth.Approvals.Routes["kv.put"] != syscalls.ApprovalOperator {
		t.Fatalf("authoring.json = %+v", auth)
	}

	// The per-route slots: approvals.routes, limits.syscall_budgets and
	// limits.syscall_sizes are the approval, budget and size slots of the image's policy.
	slots := loadImage(t, "route-slots.yaml")
	pol := slots.Policy()
	if pol.RouteSizes["kv.put"].MaxArgsBytes != 4096 || pol.RouteSizes["kv"].MaxResultBytes != 16384 ||
		pol.RouteBudgets["kv.put"] != 20 || pol.RouteApprovals["kv.put"] != syscalls.ApprovalOperator {
		t.Fatalf("route-slots.yaml policy = %+v", pol)
	}
	if _, probs := syscalls.CompilePolicy(pol); probs != nil {
		t.Fatalf("route-slots.yaml: %+v", probs)
	}

	// "A default image is embedded in the binary": clock:now, kv:read, kv:write,
	// tools:call; echo, the JIT tools and the Skill tool; the project's two Skills.
	def, err := tools.DefaultImage()
	if err != nil {
		t.Fatal(err)
	}
	if def.Name != "default" || !slices.Equal(def.Capabilities, []string{"clock:now", "kv:read", "kv:write", "tools:call"}) ||
		!slices.Equal(def.Tools, []string{"echo", "propose_jit_tool", "validate_jit_tool", "register_jit_tool", "activate_skill", "deactivate_skill"}) ||
		len(def.Skills) != 2 || def.Skills[0].Name != "protocol-diagnostics" || def.Skills[1].Name != "jit-authoring" {
		t.Fatalf("default image = %+v", def)
	}
	if def.Digest() == echo.Digest() || def.Digest() != def.Digest() {
		t.Fatal("digests do not tell images apart")
	}
}

// TestBadImages: "a bad image fails to load with every problem listed at once";
// unknown fields are rejected; "loading rejects a Skill whose allowed-tools names
// run_jit_tool or a tool the image does not provide".
func TestBadImages(t *testing.T) {
	cases := []struct {
		file string
		rule string
		want []string // "path: substring", every one must be among the problems
	}{
		{"bad-unknown-fields.yaml", "unknown fields rejected, at every level", []string{
			": additional properties 'capabilites' not allowed", "/limits: additional properties 'max_memory' not allowed"}},
		{"bad-many.yaml", "every problem listed at once", []string{
			"/name: does not match", "/version: does not match", "/projection: must be one of", "/tools: items at 0 and 2 are equal",
			"/tools/1: run_jit_tool is not a process tool", "/base_tools/0: not among the image's tools",
			"/capabilities/1: no syscall route requires capability \"fs:write\"", "/limits/max_calls: minimum",
			"/limits/max_depth: want integer", "/limits/syscall_budgets/shell: is not", "/approvals/routes/kv.put: must be one of",
			"/approvals/routes/shell.exec: is not a route", "/approvals/tools/register_jit_tool: not among the image's tools", "/approvals/jit_tools: must be one of"}},
		{"bad-slots.yaml", "the route policy slots: every problem at once, at its place", []string{
			"/limits/syscall_budgets/fs: is not", "/limits/syscall_sizes/clock.now: covers no route that reads the size slot",
			"/limits/syscall_sizes/kv.put: minProperties", "/limits/syscall_sizes/kv.get/max_result_bytes: minimum",
			"/limits/syscall_sizes/shell: is not", "/limits/syscall_sizes/kv: additional properties 'max_value_bytes'",
			"/approvals/routes/external: is not a route"}},
		{"bad-format.yaml", "a versioned manifest: another format version is refused", []string{"/format: libos.image/v1"}},
		{"bad-missing-required.yaml", "format, name, version and tools are required", []string{": missing properties 'format', 'name', 'version', 'tools'"}},
		{"bad-yaml.yaml", "a duplicate YAML key is refused", []string{"/name: appears twice"}},
		{"bad-alias.yaml", "YAML aliases are refused", []string{"/base_tools: aliases"}},
		{"bad-json.json", "JSON manifests are decoded exactly", []string{": duplicate key \"name\""}},
		{"bad-skill-run-jit.yaml", "a Skill naming run_jit_tool in allowed-tools fails to load", []string{"/skills/0/allowed-tools: run_jit_tool is not a process tool"}},
		{"bad-skill-missing-tool.yaml", "a Skill naming a tool the image does not provide fails to load", []string{
			"/skills/0/allowed-tools: \"shell_exec\", which the image does not provide", "/skills/1/allowed-tools: \"propose_jit_tool\""}},
		{"bad-skill-front-matter.yaml", "SKILL.md front matter: name, description, allowed-tools (space-separated)", []string{
			"/skills/0/name: lowercase", "/skills/0/allowed-tools: space-separated string, not a list", "/skills/0/license: unknown key",
			"/skills/0: missing \"description\"", "/skills/1: must start with a \"---\" line"}},
		{"bad-skill-paths.yaml", "Skills are read inside the image's file system only", []string{
			"/skills/0: not-there", "/skills/1: inside the image's file system", "/skills/2: inside the image's file system", "/skills/4: shipped twice"}},
		{"bad-no-skill-tool.yaml", "shipping Skills needs the Skill tool", []string{"/tools: does not enable activate_skill"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			_, err := image.LoadImage(testdataFS, "images/"+tc.file)
			if !errors.Is(err, engine.ErrInvalidImage) {
				t.Fatalf("%s: got %v, want invalid_image", tc.rule, err)
			}
			var e *engine.Error
			errors.As(err, &e)
			if len(e.Details) < len(tc.want) {
				t.Errorf("%s: %d problems listed, want at least %d: %v", tc.rule, len(e.Details), len(tc.want), e.Details)
			}
			for _, w := range tc.want {
				path, sub, _ := strings.Cut(w, ": ")
				found := false
				for _, d := range e.Details {
					if d.Path == path && strings.Contains(d.Message, sub) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no problem %q among %v", tc.rule, w, e.Details)
				}
			}
		})
	}
}

// TestParseSkill: the SKILL.md format on its own.
func TestParseSkill(t *testing.T) {
	s, err := image.ParseSkill([]byte("---\r\nname: a-b\r\ndescription: d\r\nallowed-tools: echo  propose_jit_tool\r\n---\r\nbody\r\n"))
	if err != nil || s.Name != "a-b" || !slices.Equal(s.AllowedTools, []string{"echo", "propose_jit_tool"}) || s.Instructions != "body" {
		t.Fatalf("CRLF Skill = %+v, %v", s, err)
	}
	for _, tc := range []struct{ rule, doc, want string }{
		{"the front matter is closed", "---\nname: a\n", "no closing"},
		{"allowed-tools never names run_jit_tool", "---\nname: a\ndescription: d\nallowed-tools: run_jit_tool\n---\nx", "run_jit_tool"},
		{"a Skill has instructions", "---\nname: a\ndescription: d\nallowed-tools: echo\n---\n  \n", "no instructions"},
		{"the name is a string", "---\nname: 7\ndescription: d\nallowed-tools: echo\n---\nx", "name must be a string"},
		{"keys appear once", "---\nname: a\nname: b\ndescription: d\nallowed-tools: echo\n---\nx", "twice"},
	} {
		_, err := image.ParseSkill([]byte(tc.doc))
		if !errors.Is(err, engine.ErrInvalidSkill) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want invalid_skill mentioning %q", tc.rule, err, tc.want)
		}
	}
}

// TestSpawnImage: "Kernel.Spawn(image) → PID, with the image's capabilities and
// budgets, durable"; a tool the kernel lacks is refused.
func TestSpawnImage(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	pid := w.spawnImage(t, loadImage(t, "echo.yaml"))
	info, err := w.k.Process(pid)
	if err != nil || info.Image != "echo-diagnostics" || info.ImageVersion != "0.1.0" || info.State != engine.StateRunning ||
		!slices.Equal(info.Capabilities, []string{"clock:now"}) || info.Limits.MaxCalls != 100 || info.Limits.MaxArgumentBytes != 4096 ||
		len(info.Tools) != 2 || !slices.Equal(info.Skills, []string{"echo-check"}) {
		t.Fatalf("Process = %+v, %v", info, err)
	}
	spawned := lastOf(t, w.events(t, pid), engine.EventProcessSpawned)
	if field(t, spawned, "image") != "echo-diagnostics" || field(t, spawned, "image_sha256") != info.ImageDigest {
		t.Fatalf("process_spawned = %s", spawned.Data)
	}
	// The image's limits apply: a 5000-byte argument is over its 4096.
	if _, err := w.call(pid, "echo", `{"x":"`+strings.Repeat("a", 5000)+`"}`); codeOf(err) != "limit_exceeded" {
		t.Fatalf("oversized argument: %v", err)
	}
	w.reopen(t)
	info2, err := w.k.Process(pid)
	if err != nil || info2.ImageDigest != info.ImageDigest || info2.Limits != info.Limits {
		t.Fatalf("after reopen: %+v, %v", info2, err)
	}

	img := loadImage(t, "echo.yaml")
	img.Tools = append(img.Tools, "shell")
	if _, err := w.k.SpawnImage(context.Background(), img); !errors.Is(err, engine.ErrInvalidImage) || !strings.Contains(err.Error(), `no built-in tool "shell"`) {
		t.Fatalf("image with an unknown built-in: %v", err)
	}

	// An image made in Go gets the same checks of its route policy slots as a
	// manifest: every problem at once, at its place, typed invalid_image.
	img = loadImage(t, "echo.yaml")
	img.Approvals.Routes = map[string]syscalls.ApprovalClass{"kv.put": "always"}
	img.Limits.SyscallBudgets = map[string]int64{"kv": -1}
	img.Limits.SyscallSizes = map[string]syscalls.SizeBound{"clock.now": {MaxArgsBytes: 8}, "kv.get": {}}
	_, err = w.k.SpawnImage(context.Background(), img)
	var e *engine.Error
	if !errors.Is(err, engine.ErrInvalidImage) || !errors.As(err, &e) {
		t.Fatalf("image with bad route slots: %v", err)
	}
	var at []string
	for _, d := range e.Details {
		at = append(at, d.Path)
	}
	slices.Sort(at)
	if want := []string{"/approvals/routes/kv.put", "/limits/syscall_budgets/kv", "/limits/syscall_sizes/clock.now", "/limits/syscall_sizes/kv.get"}; !slices.Equal(at, want) {
		t.Fatalf("problems at %v, want %v: %v", at, want, e.Details)
	}
}
