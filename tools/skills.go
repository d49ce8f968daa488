package tools

import (
	"embed"
	"io/fs"

	"github.com/agentlibos/libos/engine/image"
)

//go:embed skills/*/SKILL.md
var skillFiles embed.FS

// SkillFS is the file system of the project's own Skills, one directory per Skill
// holding its SKILL.md: protocol-diagnostics (echo) and jit-authoring (the JIT
// lifecycle tools).
func SkillFS() fs.FS {
	sub, err := fs.Sub(skillFiles, "skills")
	if err != nil {
		panic("tools: embedded skills: " + err.Error())
	}
	return sub
}

// DefaultImage is image.DefaultImage with the project's own Skills: echo, the JIT
// lifecycle tools and activate_skill; clock:now, kv:read, kv:write and tools:call;
// the direct projection. A kernel spawning it needs Echo, the JIT lifecycle's
// Tools() and Skill() among its built-ins.
func DefaultImage() (*image.Image, error) {
	return image.DefaultImage(SkillFS())
}
