package image

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/internal/schemaerr"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/syscalls"
)

// Projection is how a process's tool table is shown to the model.
type Projection string

const (
	// Direct shows every visible process tool, JIT tools included, as its own function
	// with its stored input schema. The zero value of engine.ProcessConfig.Projection.
	Direct Projection = "direct"
	// Multiplexed shows the non-JIT process tools plus the pseudo-function
	// run_jit_tool {"tool_name","arguments"}; JIT names and schemas stay hidden.
	Multiplexed Projection = "multiplexed"
)

// RunJITTool is the multiplexed projection's pseudo-function. It is never a process
// tool: an image may not enable it and a Skill may not allow it.
const RunJITTool = "run_jit_tool"

// SkillToolName is the built-in tool that activates a Skill (package tools builds it).
// An image that ships Skills must enable it; it always passes the Skill gate.
const SkillToolName = "activate_skill"

// DeactivateSkillToolName is the built-in tool that deactivates a Skill (package tools
// builds it). It always passes the Skill gate: a model can always leave a Skill.
const DeactivateSkillToolName = "deactivate_skill"

// SkillGate says what an active Skill's allowed-tools mean to the process.
type SkillGate string

const (
	// SkillGateOpen (the default, also the empty value): allowed-tools names the tools
	// the Skill's workflow uses, as in the Agent Skills convention. Activating a Skill
	// never takes a tool away.
	SkillGateOpen SkillGate = "open"
	// SkillGateStrict: while Skills are active, a model call reaches only the image's
	// base tools, the Skill tools and the active Skills' allowed-tools.
	SkillGateStrict SkillGate = "strict"
)

// ToolName is the form of every tool name.
var ToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// Limits bound what one tool call may carry. In engine.Config the zero value of a field
// means its default; in an image or engine.ProcessConfig it means "the kernel's limit",
// and a set field can only tighten the kernel's limit, never raise it.
type Limits struct {
	// MaxArgumentBytes bounds the raw arguments of a call (the arguments text as the
	// model sent it, or the compact form of an already decoded object). Default 64 KiB.
	MaxArgumentBytes int `json:"max_argument_bytes,omitempty"`
	// MaxResultBytes bounds a handler's result; an oversized result fails the call and
	// persists no ToolResult. Default 64 KiB.
	MaxResultBytes int `json:"max_result_bytes,omitempty"`
	// MaxDepth bounds the nesting of arguments and results. Default 64.
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxCalls is the process's tool-call budget: how many calls may ever reach
	// tool_called. 0 means no budget.
	MaxCalls int64 `json:"max_calls,omitempty"`
	// MaxCallEvents bounds the events one top-level call may append to the process's
	// log, its nested calls (tools.call) and syscall audits included; the settlement of
	// a call that was opened is never refused. Default 4096.
	MaxCallEvents int64 `json:"max_call_events,omitempty"`
	// MaxCallEventBytes bounds the bytes of event data one top-level call may append.
	// Default 8 MiB.
	MaxCallEventBytes int64 `json:"max_call_event_bytes,omitempty"`
	// MaxLogEvents bounds the process's event log, and so its growth in the store (each
	// event's data is bounded by the argument and result limits). Default 10,000,000.
	MaxLogEvents int64 `json:"max_log_events,omitempty"`
	// MaxLogBytes bounds the bytes of event data in the process's log, counted in the
	// store across restarts. Default 1 GiB.
	MaxLogBytes int64 `json:"max_log_bytes,omitempty"`
}

// ImageFormat is the manifest format this package reads. A manifest names it in its
// "format" field; any other value is refused.
const ImageFormat = "libos.image/v1"

// MaxImageBytes bounds a manifest.
const MaxImageBytes = 1 << 20

//go:embed images/image.schema.json
var imageSchemaText []byte

//go:embed images/default.yaml
var defaultManifest []byte

// imageSchema is compiled on first use, not at package initialisation: every command of
// the binary initialises this package, and most never read a manifest.
var imageSchema = sync.OnceValue(func() *jsonschema.Schema {
	doc, err := jsonexact.Decode(imageSchemaText, 64)
	if err != nil {
		panic("image: schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("urn:libos:image:v1", doc.ToAny()); err != nil {
		panic("image: schema: " + err.Error())
	}
	s, err := c.Compile("urn:libos:image:v1")
	if err != nil {
		panic("image: schema: " + err.Error())
	}
	return s
})

// Image is what a process is made from: a loaded, checked manifest with the text of
// its Skills. Its JSON form (the Skills whole) is what the process record keeps, so a
// reopened kernel needs no manifest file.
type Image struct {
	Format      string `json:"format"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// ProcessLabels are key=value labels every process of the image carries. They
	// decide nothing inside a process; in the replicated mode a host may be told to
	// serve only the processes with given labels (serve --serve-labels).
	ProcessLabels map[string]string `json:"process_labels,omitempty"`
	// Instructions are model-facing: the kernel renders them, with the Skill catalog,
	// in Kernel.Instructions.
	Instructions string `json:"instructions,omitempty"`
	// Tools are the built-in tools enabled in the process tool table.
	Tools []string `json:"tools"`
	// BaseTools are the tools that stay allowed while Skills are active (the Skill
	// tool always does). Every one is in Tools.
	BaseTools []string `json:"base_tools,omitempty"`
	// Skills are the Skills the image ships, parsed.
	Skills []Skill `json:"skills,omitempty"`
	// Capabilities are granted at spawn. Each is required by some syscall route.
	Capabilities []string `json:"capabilities,omitempty"`
	// SkillGate is open (the default) or strict: whether active Skills' allowed-tools
	// limit what the model may call.
	SkillGate SkillGate `json:"skill_gate,omitempty"`
	// Projection is direct (the default) or multiplexed.
	Projection Projection  `json:"projection,omitempty"`
	Limits     ImageLimits `json:"limits,omitzero"`
	// Approvals raise routes and tools to operator approval.
	Approvals ApprovalPolicy `json:"approvals,omitzero"`
	// PolicySpec is the route policy: net (egress), secrets, labels, data_flow and
	// external_tools, top-level fields of the manifest. Its zero value refuses every
	// fetch and labels nothing.
	syscalls.PolicySpec
}

// ImageLimits are an image's limits: the kernel's per-call limits (which only
// tighten the kernel's), the sandbox bounds of its JIT tools and its durable syscall
// budgets.
type ImageLimits struct {
	Limits
	Sandbox SandboxLimits `json:"sandbox,omitzero"`
	// Journal bounds the syscall journal of each JIT tool call (what a call's export
	// as a tape can hold); zero fields are syscalls' defaults.
	Journal syscalls.JournalLimits `json:"journal,omitzero"`
	// SyscallBudgets is the budget slot (syscalls.SlotBudget): a budget name
	// (syscalls.BudgetAll, an area such as "kv", or a route) to the most calls the
	// process may ever make.
	SyscallBudgets map[string]int64 `json:"syscall_budgets,omitempty"`
	// SyscallSizes is the size slot (syscalls.SlotSize): syscalls.BudgetAll, an area
	// or a route to a bound on the bytes of a route's arguments and result.
	SyscallSizes map[string]syscalls.SizeBound `json:"syscall_sizes,omitempty"`
}

// SandboxLimits bound one JIT tool call in the sandbox. Zero means the sandbox's
// default. The JIT lifecycle reads them from Call.Sandbox.
type SandboxLimits struct {
	WallTimeMillis int64 `json:"wall_time_ms,omitempty"`
	MemoryBytes    int64 `json:"memory_bytes,omitempty"`
}

// WallTime is WallTimeMillis as a duration.
func (s SandboxLimits) WallTime() time.Duration {
	return time.Duration(s.WallTimeMillis) * time.Millisecond
}

// ApprovalPolicy raises routes and tools to operator approval.
type ApprovalPolicy struct {
	// Routes is the approval slot (syscalls.SlotApproval): a route name ("kv.put"), an
	// area ("kv": every kv.* route) or a side-effect class ("read", "write") to its
	// approval class. A class can only be raised: the route table's own operator
	// class always stands.
	Routes map[string]syscalls.ApprovalClass `json:"routes,omitempty"`
	// Tools maps a tool of the image to its approval class: an operator-class tool
	// waits for a decision before its call is opened.
	Tools map[string]syscalls.ApprovalClass `json:"tools,omitempty"`
	// JITTools is the approval class of every JIT tool the process registers: with
	// operator, each call of model-written code waits for a decision bound to its
	// arguments and the tool's definition, as an operator-class image tool's does.
	JITTools syscalls.ApprovalClass `json:"jit_tools,omitempty"`
}

// ToolApproval is the approval class of a call of tool name: jit says whether it is
// a JIT tool of the process (JITTools) or an image tool (Tools).
func (p ApprovalPolicy) ToolApproval(name string, jit bool) syscalls.ApprovalClass {
	if jit {
		return p.JITTools
	}
	return p.Tools[name]
}

// manifest is the on-disk form: Skills are paths.
type manifest struct {
	Format       string            `json:"format"`
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Description  string            `json:"description"`
	ProcLabels   map[string]string `json:"process_labels"`
	Instructions string            `json:"instructions"`
	Tools        []string          `json:"tools"`
	BaseTools    []string          `json:"base_tools"`
	Skills       []string          `json:"skills"`
	Capabilities []string          `json:"capabilities"`
	Projection   Projection        `json:"projection"`
	SkillGate    SkillGate         `json:"skill_gate"`
	Limits       ImageLimits       `json:"limits"`
	Approvals    ApprovalPolicy    `json:"approvals"`
	syscalls.PolicySpec
}

// DefaultImage is the image embedded in the binary: echo, the JIT lifecycle tools and
// the Skill tool; clock:now, kv:read, kv:write and tools:call; direct projection; the
// Skills protocol-diagnostics and jit-authoring, read from skills (a directory per
// Skill holding SKILL.md; package tools embeds them and offers tools.DefaultImage).
func DefaultImage(skills fs.FS) (*Image, error) {
	return ParseImage(defaultManifest, skills)
}

// LoadImage reads the manifest at name in fsys (YAML, or JSON when it starts with
// "{"). Skill entries are directories holding a SKILL.md, relative to the manifest's
// directory, inside fsys. Every problem of the manifest and its Skills is listed at
// once in the Details of an *Error with code invalid_image.
func LoadImage(fsys fs.FS, name string) (*Image, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, liberr.WrapQuoting(layer, CodeInvalidImage, err, "image")
	}
	return parseImage(data, fsys, path.Dir(name))
}

// ParseImage parses a manifest whose Skill entries are relative to the root of fsys
// (nil when it ships none). See LoadImage.
func ParseImage(data []byte, fsys fs.FS) (*Image, error) {
	return parseImage(data, fsys, ".")
}

func parseImage(data []byte, fsys fs.FS, dir string) (*Image, error) {
	var ps problems
	img := decodeManifest(data, fsys, dir, &ps)
	if err := ps.Err(CodeInvalidImage, "image"); err != nil {
		return nil, err
	}
	return img, nil
}

func decodeManifest(data []byte, fsys fs.FS, dir string, ps *problems) *Image {
	if len(data) > MaxImageBytes {
		ps.add("", "the manifest is %d bytes, more than %d", len(data), MaxImageBytes)
		return nil
	}
	var doc any
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		v, err := jsonexact.Decode(data, 64)
		if err != nil {
			ps.add("", "the manifest is not exact JSON: %v", err)
			return nil
		}
		doc = v.ToAny()
	} else {
		var node yaml.Node
		if err := yaml.Unmarshal(data, &node); err != nil {
			ps.add("", "the manifest is not YAML: %s", yamlMessage(err))
			return nil
		}
		if len(node.Content) == 0 {
			ps.add("", "the manifest is empty")
			return nil
		}
		doc = yamlValue(node.Content[0], "", ps, 0)
		if len(*ps) > 0 {
			return nil
		}
	}
	if _, ok := doc.(map[string]any); !ok {
		ps.add("", "the manifest must be a mapping (an object)")
		return nil
	}
	if err := schemaerr.Canonical(imageSchema().Validate(doc)); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			ps.add("", "%v", err)
		} else {
			schemaProblems(ve, ps)
		}
	}
	obj := doc.(map[string]any)
	img := checkManifest(obj, fsys, dir, ps)
	if len(*ps) > 0 {
		return nil
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		ps.add("", "%v", err)
		return nil
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		ps.add("", "%v", err)
		return nil
	}
	img.Format, img.Name, img.Version, img.Description = m.Format, m.Name, m.Version, m.Description
	if len(m.ProcLabels) > 0 {
		img.ProcessLabels = m.ProcLabels
	}
	img.Instructions = strings.TrimSpace(m.Instructions)
	img.Tools, img.BaseTools, img.Capabilities = m.Tools, m.BaseTools, m.Capabilities
	img.Projection, img.Limits, img.Approvals = m.Projection, m.Limits, m.Approvals
	if m.SkillGate == SkillGateStrict {
		img.SkillGate = SkillGateStrict // open is the zero value, so old images keep their digest
	}
	img.PolicySpec = m.PolicySpec
	if img.Projection == "" {
		img.Projection = Direct
	}
	return img
}

// schemaProblems lists the leaf findings of a schema validation.
func schemaProblems(ve *jsonschema.ValidationError, ps *problems) {
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			ps.add(u.InstanceLocation, "%s", u.Error.String())
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.DetailedOutput())
}

// yamlValue turns a YAML node into the value JSON would give (map[string]any, []any,
// json.Number, string, bool, nil). Aliases, merge keys, non-string keys, duplicate
// keys and non-finite numbers are refused: a manifest means one thing.
func yamlValue(n *yaml.Node, at string, ps *problems, depth int) any {
	if depth > 32 {
		ps.add(at, "nested too deeply")
		return nil
	}
	switch n.Kind {
	case yaml.AliasNode:
		ps.add(at, "YAML aliases are not allowed in a manifest")
		return nil
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				ps.add(at, "line %d: keys must be strings (got %s)", k.Line, strings.TrimPrefix(k.ShortTag(), "!!"))
				continue
			}
			p := at + "/" + jsonexact.EscapePointer(k.Value)
			if _, dup := out[k.Value]; dup {
				ps.add(p, "line %d: key %q appears twice", k.Line, k.Value)
				continue
			}
			out[k.Value] = yamlValue(v, p, ps, depth+1)
		}
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = yamlValue(c, at+"/"+strconv.Itoa(i), ps, depth+1)
		}
		return out
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp":
			return n.Value
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				ps.add(at, "line %d: %s", n.Line, yamlMessage(err))
			}
			return b
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				ps.add(at, "line %d: %s", n.Line, yamlMessage(err))
				return nil
			}
			return json.Number(strconv.FormatInt(i, 10))
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				ps.add(at, "line %d: %q is not a finite number", n.Line, n.Value)
				return nil
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		ps.add(at, "line %d: unsupported YAML tag %s", n.Line, n.Tag)
		return nil
	}
	ps.add(at, "unsupported YAML node")
	return nil
}

// strings returns the string items of doc[key] (other items are the schema's
// problem), with their index.
func stringsAt(doc map[string]any, key string) map[int]string {
	out := map[int]string{}
	if a, ok := doc[key].([]any); ok {
		for i, v := range a {
			if s, ok := v.(string); ok {
				out[i] = s
			}
		}
	}
	return out
}

func ordered(m map[int]string) []int {
	is := make([]int, 0, len(m))
	for i := range m {
		is = append(is, i)
	}
	sort.Ints(is)
	return is
}

// keysAt returns the keys of the object at doc[path...].
func keysAt(doc map[string]any, path ...string) []string {
	var cur any = doc
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, _ := cur.(map[string]any)
	return slices.Sorted(maps.Keys(m))
}

// checkManifest makes the checks a schema cannot: references between fields, the
// Skills, and the route table. It reads the decoded document leniently, so that a
// field of the wrong type (the schema's finding) does not hide the others' problems.
func checkManifest(doc map[string]any, fsys fs.FS, dir string, ps *problems) *Image {
	img := &Image{}
	toolList := stringsAt(doc, "tools")
	tools := map[string]bool{}
	for _, i := range ordered(toolList) {
		t := toolList[i]
		if t == RunJITTool {
			ps.add("/tools/"+strconv.Itoa(i), "%s is not a process tool and cannot be enabled", RunJITTool)
		}
		tools[t] = true
	}
	base := stringsAt(doc, "base_tools")
	for _, i := range ordered(base) {
		if !tools[base[i]] {
			ps.add("/base_tools/"+strconv.Itoa(i), "base tool %q is not among the image's tools", base[i])
		}
	}

	caps := map[string]bool{}
	for _, r := range syscalls.Routes() {
		caps[string(r.Capability)] = true
	}
	capList := stringsAt(doc, "capabilities")
	for _, i := range ordered(capList) {
		if c := capList[i]; !caps[c] {
			ps.add("/capabilities/"+strconv.Itoa(i), "no syscall route requires capability %q (capabilities are exact strings)", c)
		}
	}
	for _, k := range keysAt(doc, "approvals", "tools") {
		if !tools[k] {
			ps.add("/approvals/tools/"+jsonexact.EscapePointer(k), "tool %q is not among the image's tools", k)
		}
	}

	for _, i := range ordered(stringsAt(doc, "external_tools")) {
		if t := stringsAt(doc, "external_tools")[i]; !tools[t] {
			ps.add("/external_tools/"+strconv.Itoa(i), "tool %q is not among the image's tools", t)
		}
	}
	// The route policy, every slot (approvals, budgets and size bounds per route too),
	// is checked by syscalls against the route table. A place the schema already
	// found wrong is not reported twice.
	if spec, ok := policySpecOf(doc); ok {
		_, probs := syscalls.CompilePolicy(spec)
		reported := map[string]bool{}
		for _, d := range *ps {
			reported[d.Path] = true
		}
		for _, p := range probs {
			if !reported[p.At] {
				ps.add(p.At, "%s", p.Message)
			}
		}
	}

	skillList := stringsAt(doc, "skills")
	if len(skillList) > 0 && !tools[SkillToolName] {
		ps.add("/tools", "the image ships Skills but does not enable %s, so none could be activated", SkillToolName)
	}
	seen := map[string]int{}
	for _, i := range ordered(skillList) {
		entry := skillList[i]
		at := "/skills/" + strconv.Itoa(i)
		p := path.Join(dir, entry, "SKILL.md")
		if fsys == nil || !fs.ValidPath(p) || path.IsAbs(entry) {
			ps.add(at, "Skill %q cannot be read: it must be a directory inside the image's file system", entry)
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			ps.add(at, "Skill %q: %v", entry, err)
			continue
		}
		before := len(*ps)
		s := parseSkill(data, at, ps)
		s.Source = p
		if len(*ps) > before {
			continue
		}
		if j, dup := seen[s.Name]; dup {
			ps.add(at, "Skill %q is shipped twice (also /skills/%d)", s.Name, j)
			continue
		}
		seen[s.Name] = i
		for _, t := range s.AllowedTools {
			if !tools[t] {
				ps.add(at+"/allowed-tools", "Skill %s allows %q, which the image does not provide", s.Name, t)
			}
		}
		img.Skills = append(img.Skills, s)
	}
	return img
}

// policySpecOf reads the route policy of the document: the top-level fields and the
// per-route slots nested under approvals and limits. It is false when the top-level
// fields do not decode (a type the schema already reports), so those problems are not
// listed twice; a nested slot that does not decode is left empty, for the same reason.
func policySpecOf(doc map[string]any) (syscalls.PolicySpec, bool) {
	var spec syscalls.PolicySpec
	part := map[string]any{}
	for _, k := range []string{"net", "secrets", "labels", "data_flow", "external_tools"} {
		if v, ok := doc[k]; ok {
			part[k] = v
		}
	}
	raw, err := json.Marshal(part)
	if err != nil || json.Unmarshal(raw, &spec) != nil {
		return syscalls.PolicySpec{}, false
	}
	nested := []struct {
		path []string
		into any
	}{
		{[]string{"approvals", "routes"}, &spec.RouteApprovals},
		{[]string{"limits", "syscall_budgets"}, &spec.RouteBudgets},
		{[]string{"limits", "syscall_sizes"}, &spec.RouteSizes},
	}
	for _, n := range nested {
		v, ok := valueAt(doc, n.path...)
		if !ok {
			continue
		}
		// A slot of the wrong type is the schema's finding; the others are still
		// checked.
		if raw, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(raw, n.into)
		}
	}
	return spec, true
}

// valueAt returns the value at doc[path...].
func valueAt(doc map[string]any, path ...string) (any, bool) {
	var cur any = doc
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Digest is the SHA-256 of the image's JSON form, Skills included: two processes
// with the same digest were made from the same thing.
func (img *Image) Digest() string {
	b, _ := json.Marshal(img)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Clone returns a deep copy, so that a process never shares slices or maps with the
// caller's Image.
func (img *Image) Clone() *Image {
	c := *img
	c.Tools = slices.Clone(img.Tools)
	c.BaseTools = slices.Clone(img.BaseTools)
	c.Capabilities = slices.Clone(img.Capabilities)
	c.Skills = make([]Skill, len(img.Skills))
	for i, s := range img.Skills {
		s.AllowedTools = slices.Clone(s.AllowedTools)
		c.Skills[i] = s
	}
	c.Limits.SyscallBudgets = maps.Clone(img.Limits.SyscallBudgets)
	c.Limits.SyscallSizes = maps.Clone(img.Limits.SyscallSizes)
	c.Approvals.Routes = maps.Clone(img.Approvals.Routes)
	c.Approvals.Tools = maps.Clone(img.Approvals.Tools)
	c.PolicySpec = img.PolicySpec.Clone()
	return &c
}

// Skill returns the Skill named name.
func (img *Image) Skill(name string) (Skill, bool) {
	for _, s := range img.Skills {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}

// Policy is the image's route policy with every slot filled: the top-level fields
// (net, secrets, labels, data_flow, external_tools) and the per-route slots the
// manifest nests elsewhere (approvals.routes, limits.syscall_budgets,
// limits.syscall_sizes). It is what syscalls.CompilePolicy checks and the router
// reads.
func (img *Image) Policy() syscalls.PolicySpec {
	spec := img.PolicySpec
	spec.RouteApprovals = img.Approvals.Routes
	spec.RouteBudgets = img.Limits.SyscallBudgets
	spec.RouteSizes = img.Limits.SyscallSizes
	return spec
}
