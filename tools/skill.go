package tools

import (
	"context"
	"encoding/json"

	"github.com/agentlibos/libos/engine"
)

// SkillName is the name of the Skill tool (engine.SkillToolName).
const SkillName = engine.SkillToolName

// Skill returns the built-in Skill tool, activate_skill {"name"}: it activates one of
// the Skills the process's image ships and returns its instructions, its
// allowed-tools and the Skills now active. Activation is durable and audited
// (skill_activated). It takes no tool away, unless the image asks for a strict Skill
// gate (skill_gate: strict): then the kernel refuses a model call to any tool outside
// the image's base tools, the Skill tools and the active Skills' allowed-tools. The catalog of Skills
// (names and descriptions) is in the process's instructions (engine.Kernel.Instructions).
func Skill() engine.Tool {
	return engine.Tool{
		Name: SkillName,
		Description: "Activate one of this process's Skills by name and return its instructions and the tools its " +
			"workflow uses. The Skill catalog is in your instructions.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":64,` +
			`"description":"The Skill's name, as listed in the catalog."}},"required":["name"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},` +
			`"instructions":{"type":"string"},"allowed_tools":{"type":"array","items":{"type":"string"}},` +
			`"active_skills":{"type":"array","items":{"type":"string"}},"jit_tools":{"type":"array","items":{"type":"string"}}},` +
			`"required":["name","description","instructions","allowed_tools","active_skills"],"additionalProperties":false}`),
		Annotations: engine.Annotations{Title: "Activate a Skill", ReadOnly: false, Destructive: false, Idempotent: true},
		Kind:        engine.KindBuiltin,
		Handler:     activateSkill,
	}
}

// DeactivateSkillName is the name of the tool that leaves a Skill
// (engine.DeactivateSkillToolName).
const DeactivateSkillName = engine.DeactivateSkillToolName

// DeactivateSkill returns the built-in tool deactivate_skill {"name"}: it deactivates
// an active Skill of the process (durable and audited, skill_deactivated) and returns
// the Skills still active. It always passes the Skill gate, so a model is never stuck
// in a Skill.
func DeactivateSkill() engine.Tool {
	return engine.Tool{
		Name:        DeactivateSkillName,
		Description: "Deactivate one of this process's active Skills by name; returns the Skills still active.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":64,` +
			`"description":"The active Skill's name."}},"required":["name"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},` +
			`"active_skills":{"type":"array","items":{"type":"string"}}},"required":["name","active_skills"],"additionalProperties":false}`),
		Annotations: engine.Annotations{Title: "Deactivate a Skill", ReadOnly: false, Destructive: false, Idempotent: false},
		Kind:        engine.KindBuiltin,
		Handler:     deactivateSkill,
	}
}

func deactivateSkill(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
	name, err := skillName(call)
	if err != nil {
		return nil, err
	}
	active, err := call.DeactivateSkill(ctx, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"name": name, "active_skills": active})
}

// skillName reads the one argument activate_skill and deactivate_skill take.
func skillName(call *engine.Call) (string, error) {
	obj, err := decodeArgs(call, []string{"name"})
	if err != nil {
		return "", err
	}
	name, ok := obj["name"].(string)
	if !ok {
		return "", errorf(CodeInvalidRequest, `"name" must be a string`)
	}
	return name, nil
}

func activateSkill(ctx context.Context, call *engine.Call) (json.RawMessage, error) {
	name, err := skillName(call)
	if err != nil {
		return nil, err
	}
	act, err := call.ActivateSkill(ctx, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(act)
}
