package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Completions (completion/complete): suggestions for what the server itself serves
// with variables, never for anything it does not list.
//
//   - skill://{name}/SKILL.md: name completes to the image's Skill names.
//   - libos://process/{pid}/events/after/{seq} and libos://process/{pid}/candidates/{id},
//     under the direct projection only (they are listed only there): pid completes
//     to the served process, id to its candidates' IDs; seq has no suggestions (any
//     event sequence number is a page).
//   - Prompts (the image's Skills) take no arguments, so no argument of a prompt
//     completes: completing one is invalid params, as for an unknown prompt.
//
// A reference the server does not serve (an unknown prompt or template, or the
// audit log and candidates templates under the multiplexed projection) is invalid
// params with the same message whatever was named, so a completion reveals no more
// than the listings: in the multiplexed projection, no JIT tool's name.

// maxCompletions is the most values one answer holds (the protocol's limit).
const maxCompletions = 100

func (s *Server) complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	invalid := func(format string, args ...any) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
	}
	if p == nil || p.Ref == nil {
		return nil, invalid("completion/complete needs a ref")
	}
	arg, prefix := p.Argument.Name, p.Argument.Value
	var given map[string]string
	if p.Context != nil {
		given = p.Context.Arguments
	}
	switch p.Ref.Type {
	case "ref/prompt":
		if _, ok := s.skill(skillURI(p.Ref.Name)); !ok {
			return nil, invalid("no prompt named %q", p.Ref.Name)
		}
		return nil, invalid("prompt %q takes no arguments, so %q has no completions", p.Ref.Name, arg)
	case "ref/resource":
	default:
		return nil, invalid("completion/complete: unknown ref type %q", p.Ref.Type)
	}
	var values []string
	switch uri := p.Ref.URI; {
	case uri == skillTemplate && arg == "name":
		docs, err := s.k.SkillDocuments(s.pid)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			values = append(values, d.Name)
		}
	case (uri == eventsTemplate || uri == candidatesTemplate) && !s.hidden():
		switch {
		case arg == "pid":
			values = []string{s.pid}
		case uri == eventsTemplate && arg == "seq":
			// Every sequence number names a page: nothing to suggest.
		case uri == candidatesTemplate && arg == "id":
			if pid, ok := given["pid"]; ok && pid != s.pid {
				break // this server serves one process's candidates
			}
			cs, err := s.k.Candidates(s.pid)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				values = append(values, c.ID)
			}
		default:
			return nil, invalid("resource template %q has no variable %q", uri, arg)
		}
	case uri == skillTemplate:
		return nil, invalid("resource template %q has no variable %q", uri, arg)
	default:
		return nil, invalid("no resource template %q", uri)
	}
	values = slices.DeleteFunc(values, func(v string) bool { return !strings.HasPrefix(v, prefix) })
	slices.Sort(values)
	out := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}, Total: len(values)}}
	if len(values) > maxCompletions {
		values, out.Completion.HasMore = values[:maxCompletions], true
	}
	out.Completion.Values = append(out.Completion.Values, values...)
	return out, nil
}
