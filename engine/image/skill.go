package image

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
)

// layer names the package in its errors. An image's errors are the kernel's to
// report, so they say "engine", as they did before images had a package of their own.
const layer = "engine"

// The codes of this package.
const (
	// CodeInvalidImage: an image manifest (or one of its Skills) is unusable; the
	// error's Details list every problem at once.
	CodeInvalidImage liberr.Code = liberr.CodeInvalidImage
	// CodeInvalidSkill: a SKILL.md document is unusable; Details list every problem.
	CodeInvalidSkill liberr.Code = liberr.CodeInvalidSkill
)

// Bounds of a SKILL.md document.
const (
	MaxSkillBytes       = 64 << 10
	maxSkillDescription = 1024
)

var skillNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

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
	if err := ps.Err(CodeInvalidSkill, "skill"); err != nil {
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
		path := at + "/" + jsonexact.EscapePointer(key)
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
				if len(n) > 64 || !skillNameRE().MatchString(n) {
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
					case !ToolName().MatchString(t):
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
type problems []liberr.Detail

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, liberr.Detail{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Err is every problem at once, as the Details of an error with code, or nil when
// there is none. what names the document ("image", "skill").
func (ps problems) Err(code liberr.Code, what string) error {
	if len(ps) == 0 {
		return nil
	}
	return &liberr.Error{Code: code, Layer: layer, Details: ps, Message: fmt.Sprintf("%s: %d problem(s): %s", what, len(ps), liberr.DescribeDetails(ps))}
}

// Problems is a list of findings, for the checks a kernel adds (its built-in tools).
type Problems = problems

// Add appends a finding at path.
func (ps *problems) Add(path, format string, args ...any) { ps.add(path, format, args...) }

// noLoader refuses every URL that is not already in the compiler: the image schema
// never makes a load fetch a remote (or local file) $ref.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not loaded from %s", url)
}
