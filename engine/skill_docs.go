package engine

import "slices"

// SkillDocuments returns the Skills the image of pid ships, whole (front matter
// fields and instructions), in the image's order: what a client may read as
// resources and prompts. Skills name tools of the image only, never a JIT tool.
func (k *Kernel) SkillDocuments(pid string) ([]Skill, error) {
	p, err := k.process(pid)
	if err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Skill, len(p.img.Skills))
	for i, s := range p.img.Skills {
		s.AllowedTools = slices.Clone(s.AllowedTools)
		out[i] = s
	}
	return out, nil
}
