package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/liberr"
)

// SkillToolName is the built-in tool that activates a Skill (image.SkillToolName).
const SkillToolName = image.SkillToolName

// DeactivateSkillToolName is the built-in tool that deactivates a Skill
// (image.DeactivateSkillToolName).
const DeactivateSkillToolName = image.DeactivateSkillToolName

// jitRegistrar is the lifecycle tool that registers JIT tools. A Skill whose
// allowed-tools names it lets the process's registered JIT tools through the Skill gate:
// the authoring workflow ends by calling the tool it registered.
const jitRegistrar = "register_jit_tool"

// Skill is one SKILL.md document (image.Skill).
type Skill = image.Skill

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
		rule := "its allowed tools are the ones its workflow uses; no tool is taken away"
		if p.img.SkillGate == image.SkillGateStrict {
			rule = "while any is active, only its allowed tools can be called"
		}
		fmt.Fprintf(&b, "Skills (call %s {\"name\": …} to load one's instructions and %s {\"name\": …} to leave it; %s):\n",
			SkillToolName, DeactivateSkillToolName, rule)
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
	s, ok := p.img.Skill(name)
	if !ok {
		names := make([]string, len(p.img.Skills))
		for i, s := range p.img.Skills {
			names[i] = s.Name
		}
		return nil, errorf(CodeUnknownSkill, "no Skill %q in this process (its Skills: %s)", liberr.Clip(name, 80), strings.Join(names, ", "))
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
	err := k.change(ctx, pid, "deactivate Skills", EventSkillDeactivated, map[string]any{"by": "operator"}, func(p *process) (func(), error) {
		old := p.active
		p.active = nil
		return func() { p.active = old }, nil
	})
	if err == nil {
		k.notify(pid)
	}
	return err
}

// DeactivateSkill deactivates the active Skill name of pid (the operator's side of the
// deactivate_skill tool), recorded by a skill_deactivated event. It returns the Skills
// still active.
func (k *Kernel) DeactivateSkill(ctx context.Context, pid, name string) ([]string, error) {
	p, err := k.process(pid)
	if err != nil {
		return nil, err
	}
	return k.deactivate(ctx, p, name, "operator")
}

// DeactivateSkill deactivates Skill name in the calling process; it is what the
// deactivate_skill tool's handler calls. See Kernel.DeactivateSkill.
func (c *Call) DeactivateSkill(ctx context.Context, name string) ([]string, error) {
	if c.k == nil || c.p == nil {
		return nil, errorf(CodeInvalidConfig, "this call was not made by a kernel")
	}
	return c.k.deactivate(ctx, c.p, name, c.Via)
}

func (k *Kernel) deactivate(ctx context.Context, p *process, name, by string) ([]string, error) {
	if _, ok := p.img.Skill(name); !ok {
		return nil, errorf(CodeUnknownSkill, "no Skill %q in this process", liberr.Clip(name, 80))
	}
	err := k.change(ctx, p.pid, "deactivate Skill "+name, EventSkillDeactivated,
		map[string]any{"skill": name, "by": by}, func(p *process) (func(), error) {
			i := slices.Index(p.active, name)
			if i < 0 {
				return nil, errorf(CodeInvalidState, "Skill %s is not active", name)
			}
			old := p.active
			p.active = slices.Delete(slices.Clone(p.active), i, i+1)
			return func() { p.active = old }, nil
		})
	if err != nil {
		return nil, err
	}
	k.notify(p.pid)
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]string{}, p.active...), nil
}
