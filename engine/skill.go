package engine

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// SkillToolName is the built-in tool that activates a Skill (package tools builds it).
// An image that ships Skills must enable it; it always passes the Skill gate.
const SkillToolName = "activate_skill"

// jitRegistrar is the lifecycle tool that registers JIT tools. A Skill whose
// allowed-tools names it lets the process's registered JIT tools through the Skill gate:
// the authoring workflow ends by calling the tool it registered.
const jitRegistrar = "register_jit_tool"

// Bounds of a SKILL.md document.
const (
	MaxSkillBytes       = 64 << 10
	maxSkillDescription = 1024
)

var skillNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Skill is one SKILL.md document: YAML front matter (name, description,
// allowed-tools) and the instructions that follow it.
type Skill struct {
	// Name matches ^[a-z0-9]+(-[a-z0-9]+)*$, at most 64 bytes.
	Name string `json:"name"`
	// Description is what the catalog shows the model: what the Skill is for and when.
	Description string `json:"description"`
	// AllowedTools are the tools the Skill may use, from the space-separated
	// allowed-tools field. While Skills are active this is a hard limit at dispatch.
	AllowedTools []string `json:"allowed_tools"`
	// Instructions is the Markdown body after the front matter, returned on activation.
	Instructions string `json:"instructions"`
	// Source is where the document was loaded from (a path in the image's FS).
	Source string `json:"source,omitempty"`
}

// ParseSkill parses a SKILL.md document. Every problem is listed at once, as the
// Details of an *Error with code invalid_skill: a missing or unterminated front matter, unknown or
// missing keys, a bad name, an empty description, an allowed-tools that is not a
// space-separated string or names run_jit_tool, an empty body. Whether the tools exist
// is the image's question (see LoadImage).
func ParseSkill(data []byte) (Skill, error) {
	var ps problems
	s := parseSkill(data, "", &ps)
	if err := ps.err(CodeInvalidSkill, "skill"); err != nil {
		return Skill{}, err
	}
	return s, nil
}

func parseSkill(data []byte, at string, ps *problems) Skill {
	var s Skill
	if len(data) > MaxSkillBytes {
		ps.add(at, "SKILL.md is %d bytes, more than %d", len(data), MaxSkillBytes)
		return s
	}
	if !utf8.Valid(data) {
		ps.add(at, "SKILL.md is not valid UTF-8")
		return s
	}
	text := strings.ReplaceAll(string(bytes.TrimPrefix(data, []byte("\ufeff"))), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		ps.add(at, `SKILL.md must start with a "---" line opening the YAML front matter`)
		return s
	}
	rest := text[len("---\n"):]
	end := strings.Index(rest, "\n---\n")
	body := ""
	switch {
	case end >= 0:
		body = rest[end+len("\n---\n"):]
	case strings.HasSuffix(rest, "\n---"):
		end = len(rest) - len("\n---")
	default:
		ps.add(at, `the front matter has no closing "---" line`)
		return s
	}
	front := rest[:end]
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(front), &node); err != nil {
		ps.add(at, "front matter: %s", yamlMessage(err))
		return s
	}
	if len(node.Content) == 0 || node.Content[0].Kind != yaml.MappingNode {
		ps.add(at, "front matter must be a YAML mapping with name, description and allowed-tools")
		return s
	}
	seen := map[string]bool{}
	m := node.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		path := at + "/" + escapePointer(key)
		if seen[key] {
			ps.add(path, "key %q appears twice", key)
			continue
		}
		seen[key] = true
		str := func() (string, bool) {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
				ps.add(path, "%s must be a string", key)
				return "", false
			}
			return v.Value, true
		}
		switch key {
		case "name":
			if n, ok := str(); ok {
				s.Name = n
				if len(n) > 64 || !skillNameRE.MatchString(n) {
					ps.add(path, "name %q must be lowercase letters, digits and single hyphens, at most 64 bytes", n)
				}
			}
		case "description":
			if d, ok := str(); ok {
				s.Description = strings.TrimSpace(d)
				switch {
				case s.Description == "":
					ps.add(path, "description must not be empty: the catalog shows it to the model")
				case len(s.Description) > maxSkillDescription:
					ps.add(path, "description is %d bytes, more than %d", len(s.Description), maxSkillDescription)
				}
			}
		case "allowed-tools":
			if v.Kind == yaml.SequenceNode {
				ps.add(path, "allowed-tools is one space-separated string, not a list")
				continue
			}
			if a, ok := str(); ok {
				s.AllowedTools = strings.Fields(a)
				dup := map[string]bool{}
				for _, t := range s.AllowedTools {
					switch {
					case t == RunJITTool:
						ps.add(path, "%s is not a process tool and must never appear in allowed-tools", RunJITTool)
					case !toolNameRE.MatchString(t):
						ps.add(path, "%q is not a tool name", t)
					case dup[t]:
						ps.add(path, "%q is listed twice", t)
					}
					dup[t] = true
				}
			}
		default:
			ps.add(path, "unknown key %q (want name, description, allowed-tools)", key)
		}
	}
	for _, k := range []string{"name", "description", "allowed-tools"} {
		if !seen[k] {
			ps.add(at, "missing %q in the front matter", k)
		}
	}
	s.Instructions = strings.TrimSpace(body)
	if s.Instructions == "" {
		ps.add(at, "the Skill has no instructions after the front matter")
	}
	return s
}

// yamlMessage strips the yaml package's prefix.
func yamlMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// problems collects every finding of a document before failing.
type problems []Detail

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Detail{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) err(code Code, what string) error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{Layer: layer, Code: code, Details: ps, Message: fmt.Sprintf("%s: %d problem(s): %s", what, len(ps), describeDetails(ps))}
}

// SkillInfo is one entry of a process's Skill catalog: what the model sees.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Active      bool   `json:"active"`
}

// SkillActivation is what activating a Skill returns to the model.
type SkillActivation struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Instructions string   `json:"instructions"`
	AllowedTools []string `json:"allowed_tools"`
	// ActiveSkills are all the Skills now active, in activation order: while any is
	// active, only the base tools and their allowed-tools can be called.
	ActiveSkills []string `json:"active_skills"`
	// JITTools are the registered JIT tools this Skill lets through (it allows
	// register_jit_tool), in the direct projection only: the multiplexed projection
	// never names JIT tools to the model.
	JITTools []string `json:"jit_tools,omitempty"`
}

// Skills returns the Skill catalog of pid: every Skill its image ships, in the
// image's order, with whether it is active. It names no JIT tool.
func (k *Kernel) Skills(pid string) ([]SkillInfo, error) {
	p, err := k.process(pid)
	if err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]SkillInfo, 0, len(p.img.Skills))
	for _, s := range p.img.Skills {
		out = append(out, SkillInfo{Name: s.Name, Description: s.Description, Active: slices.Contains(p.active, s.Name)})
	}
	return out, nil
}

// Instructions renders the model-facing instructions of pid: the image's
// instructions and the Skill catalog (names and descriptions, and how to activate
// one). It is the same in both projections and never names a JIT tool.
func (k *Kernel) Instructions(pid string) (string, error) {
	p, err := k.process(pid)
	if err != nil {
		return "", err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var b strings.Builder
	b.WriteString(p.img.Instructions)
	if len(p.img.Skills) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Skills (call %s {\"name\": …} to load one's instructions; while any is active, only its allowed tools can be called):\n", SkillToolName)
		for _, s := range p.img.Skills {
			mark := ""
			if slices.Contains(p.active, s.Name) {
				mark = " [active]"
			}
			fmt.Fprintf(&b, "- %s%s: %s\n", s.Name, mark, s.Description)
		}
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// ActivateSkill activates Skill name in pid (durably: it stays active across a
// reopen, recorded by a skill_activated event) and returns its instructions. From
// then on the Skill gate applies: a call from the model to a tool outside the base
// tools and the active Skills' allowed-tools is refused with tool_not_allowed.
func (k *Kernel) ActivateSkill(ctx context.Context, pid, name string) (*SkillActivation, error) {
	p, err := k.process(pid)
	if err != nil {
		return nil, err
	}
	return k.activate(ctx, p, name, "operator")
}

// ActivateSkill activates Skill name in the calling process; it is what the Skill
// tool's handler calls. See Kernel.ActivateSkill.
func (c *Call) ActivateSkill(ctx context.Context, name string) (*SkillActivation, error) {
	if c.k == nil || c.p == nil {
		return nil, errorf(CodeInvalidConfig, "this call was not made by a kernel")
	}
	return c.k.activate(ctx, c.p, name, c.Via)
}

func (k *Kernel) activate(ctx context.Context, p *process, name, by string) (*SkillActivation, error) {
	s, ok := p.img.skill(name)
	if !ok {
		names := make([]string, len(p.img.Skills))
		for i, s := range p.img.Skills {
			names[i] = s.Name
		}
		return nil, errorf(CodeUnknownSkill, "no Skill %q in this process (its Skills: %s)", clipString(name, 80), strings.Join(names, ", "))
	}
	var already bool
	err := k.change(ctx, p.pid, "activate Skill "+name, EventSkillActivated,
		map[string]any{"skill": name, "allowed_tools": s.AllowedTools, "by": by}, func(p *process) (func(), error) {
			if slices.Contains(p.active, name) {
				already = true
				return nil, nil
			}
			old := p.active
			p.active = append(slices.Clone(p.active), name)
			return func() { p.active = old }, nil
		})
	if err != nil {
		return nil, err
	}
	if !already {
		k.notify(p.pid)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	act := &SkillActivation{Name: s.Name, Description: s.Description, Instructions: s.Instructions,
		AllowedTools: slices.Clone(s.AllowedTools), ActiveSkills: slices.Clone(p.active)}
	if act.AllowedTools == nil {
		act.AllowedTools = []string{}
	}
	if p.projection == Direct && slices.Contains(s.AllowedTools, jitRegistrar) {
		for n, e := range p.tools {
			if e.Kind == KindJIT {
				act.JITTools = append(act.JITTools, n)
			}
		}
		sort.Strings(act.JITTools)
	}
	return act, nil
}

// DeactivateSkills deactivates every active Skill of pid (an operator's reset of the
// Skill gate), recorded by a skill_deactivated event.
func (k *Kernel) DeactivateSkills(ctx context.Context, pid string) error {
	err := k.change(ctx, pid, "deactivate Skills", EventSkillDeactivated, nil, func(p *process) (func(), error) {
		old := p.active
		p.active = nil
		return func() { p.active = old }, nil
	})
	if err == nil {
		k.notify(pid)
	}
	return err
}
