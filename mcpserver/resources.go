package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
)

// Resources and prompts: what a client (or its human) legitimately inspects.
//
//   - The process's audit log, paged and verified: libos://process/<pid>/events is
//     the first page, libos://process/{pid}/events/after/{seq} the page after an
//     event; every page says whether the whole hash chain verifies.
//   - Its JIT tool candidates with their last validation report:
//     libos://process/<pid>/candidates, and libos://process/{pid}/candidates/{id}
//     for one candidate whole.
//   - The Skills its image ships, as the MCP Skills extension has them
//     (io.modelcontextprotocol/skills): skill://<name>/SKILL.md, text/markdown,
//     listed by resources/list and by skills/list and skills/get with their digest
//     and size; and each Skill as a prompt of its name.
//
// The multiplexed projection hides JIT tools from the model ("there is no injected
// JIT catalog or per-tool schema"): the audit log and the candidates name them and
// hold their schemas, so under that projection they are neither listed nor read (a
// read is answered as for any unknown resource), and nothing served (Skills,
// prompts, templates, errors) names a JIT tool. The operator reads them with
// 'libos events' and 'libos candidates'. The projection is read again on every
// change the kernel reports and on every read.

// eventsPage is how many events one page of the audit log holds.
const eventsPage = 100

// skillsExtension is the identifier of the MCP Skills extension (SEP-2640).
const skillsExtension = "io.modelcontextprotocol/skills"

func (s *Server) eventsURI() string     { return "libos://process/" + s.pid + "/events" }
func (s *Server) candidatesURI() string { return "libos://process/" + s.pid + "/candidates" }

const (
	eventsTemplate     = "libos://process/{pid}/events/after/{seq}"
	candidatesTemplate = "libos://process/{pid}/candidates/{id}"
	skillTemplate      = "skill://{name}/SKILL.md"
)

// hidden reports whether the process is under the multiplexed projection (or gone).
func (s *Server) hidden() bool {
	info, err := s.k.Process(s.pid)
	return err != nil || info.Projection == engine.Multiplexed
}

// addSkills serves the image's Skills as resources (and a template) and prompts.
// They are the image's, fixed for the process's life.
func (s *Server) addSkills() error {
	docs, err := s.k.SkillDocuments(s.pid)
	if err != nil {
		return err
	}
	for _, d := range docs {
		body := skillFile(d)
		s.srv.AddResource(&mcp.Resource{
			URI: skillURI(d.Name), Name: d.Name, Description: d.Description, MIMEType: "text/markdown", Size: int64(len(body)),
		}, s.readSkill)
		var args []*mcp.PromptArgument
		s.srv.AddPrompt(&mcp.Prompt{Name: d.Name, Title: "Skill " + d.Name, Description: d.Description, Arguments: args}, s.getPrompt)
	}
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: skillTemplate, Name: "skill",
		Description: "a Skill of the process's image, by name (SKILL.md)", MIMEType: "text/markdown"}, s.readSkill)
	return nil
}

// syncResources lists the audit log and the candidates under the direct projection
// and removes them under the multiplexed one.
func (s *Server) syncResources() {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	hide := s.hidden()
	if s.resSynced && hide == s.resHidden {
		return
	}
	s.resSynced, s.resHidden = true, hide
	if hide {
		s.srv.RemoveResources(s.eventsURI(), s.candidatesURI())
		s.srv.RemoveResourceTemplates(eventsTemplate, candidatesTemplate)
		return
	}
	s.srv.AddResource(&mcp.Resource{URI: s.eventsURI(), Name: "audit-log", Title: "Audit log of " + s.pid,
		Description: "the process's audit log, first page, with whether its hash chain verifies", MIMEType: "application/json"}, s.readEvents)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: eventsTemplate, Name: "audit-log-page",
		Description: "the page of the audit log after event seq", MIMEType: "application/json"}, s.readEvents)
	s.srv.AddResource(&mcp.Resource{URI: s.candidatesURI(), Name: "candidates", Title: "JIT tool candidates of " + s.pid,
		Description: "the process's JIT tool candidates with their last validation report", MIMEType: "application/json"}, s.readCandidates)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: candidatesTemplate, Name: "candidate",
		Description: "one JIT tool candidate whole: source, schemas, tests and every validation", MIMEType: "application/json"}, s.readCandidates)
}

func jsonContents(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("mcp: encode %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// auditEvent is one event of the audit log as a resource shows it: hashes in hex,
// as 'libos events --export' writes them.
type auditEvent struct {
	Seq      uint64          `json:"seq"`
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	CallID   string          `json:"call_id,omitempty"`
	Data     json.RawMessage `json:"data"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

func (s *Server) readEvents(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	var after uint64
	if uri != s.eventsURI() {
		rest, ok := strings.CutPrefix(uri, s.eventsURI()+"/after/")
		n, err := strconv.ParseUint(rest, 10, 64)
		if !ok || err != nil || strconv.FormatUint(n, 10) != rest {
			return nil, resourceNotFound(uri)
		}
		after = n
	}
	if s.hidden() {
		return nil, resourceNotFound(uri)
	}
	evs, err := s.k.Events(s.pid, after, eventsPage)
	if err != nil {
		return nil, err
	}
	page := struct {
		PID          string       `json:"pid"`
		After        uint64       `json:"after"`
		Verified     bool         `json:"verified"`
		Verification string       `json:"verification"`
		Events       []auditEvent `json:"events"`
		Next         string       `json:"next,omitempty"`
	}{PID: s.pid, After: after, Verified: true, Verification: "the hash chain of the whole log verifies", Events: []auditEvent{}}
	if err := s.k.VerifyLog(s.pid); err != nil {
		page.Verified, page.Verification = false, err.Error()
	}
	for _, e := range evs {
		page.Events = append(page.Events, auditEvent{Seq: e.Seq, Type: e.Type, Time: e.Time, CallID: e.CallID, Data: e.Data,
			PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash)})
	}
	if len(evs) == eventsPage {
		page.Next = fmt.Sprintf("%s/after/%d", s.eventsURI(), evs[len(evs)-1].Seq)
	}
	return jsonContents(uri, page)
}

// candidateSummary is a candidate in the list: what it is and its last validation.
type candidateSummary struct {
	ID             string                   `json:"id"`
	Name           string                   `json:"name"`
	Description    string                   `json:"description"`
	State          string                   `json:"state"`
	Created        time.Time                `json:"created"`
	Updated        time.Time                `json:"updated"`
	LastValidation *store.ValidationAttempt `json:"last_validation,omitempty"`
	URI            string                   `json:"uri"`
}

func (s *Server) readCandidates(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id := ""
	if uri != s.candidatesURI() {
		rest, ok := strings.CutPrefix(uri, s.candidatesURI()+"/")
		if !ok || rest == "" || strings.Contains(rest, "/") {
			return nil, resourceNotFound(uri)
		}
		id = rest
	}
	if s.hidden() {
		return nil, resourceNotFound(uri)
	}
	cs, err := s.k.Candidates(s.pid)
	if err != nil {
		return nil, err
	}
	if id != "" {
		for _, c := range cs {
			if c.ID == id {
				return jsonContents(uri, c)
			}
		}
		return nil, resourceNotFound(uri)
	}
	out := []candidateSummary{}
	for _, c := range cs {
		sum := candidateSummary{ID: c.ID, Name: c.Name, Description: c.Description, State: c.State, Created: c.Created,
			Updated: c.Updated, URI: s.candidatesURI() + "/" + c.ID}
		if n := len(c.Validations); n > 0 {
			sum.LastValidation = &c.Validations[n-1]
		}
		out = append(out, sum)
	}
	return jsonContents(uri, struct {
		PID        string             `json:"pid"`
		Candidates []candidateSummary `json:"candidates"`
	}{s.pid, out})
}

func skillURI(name string) string { return "skill://" + name + "/SKILL.md" }

// skillFrontMatter is a Skill's front matter, in the order SKILL.md writes it.
type skillFrontMatter struct {
	Name         string `yaml:"name" json:"name"`
	Description  string `yaml:"description" json:"description"`
	AllowedTools string `yaml:"allowed-tools,omitempty" json:"allowed-tools,omitempty"`
}

func frontMatter(d engine.Skill) skillFrontMatter {
	return skillFrontMatter{Name: d.Name, Description: d.Description, AllowedTools: strings.Join(d.AllowedTools, " ")}
}

// skillFile is the SKILL.md of d: its front matter (the fields the image parsed)
// and its instructions.
func skillFile(d engine.Skill) []byte {
	fm, _ := yaml.Marshal(frontMatter(d))
	return []byte("---\n" + string(fm) + "---\n" + d.Instructions)
}

// skill finds the Skill a skill:// URI names.
func (s *Server) skill(uri string) (engine.Skill, bool) {
	name, ok := strings.CutPrefix(uri, "skill://")
	if !ok {
		return engine.Skill{}, false
	}
	name, ok = strings.CutSuffix(name, "/SKILL.md")
	if !ok {
		return engine.Skill{}, false
	}
	docs, err := s.k.SkillDocuments(s.pid)
	if err != nil {
		return engine.Skill{}, false
	}
	for _, d := range docs {
		if d.Name == name {
			return d, true
		}
	}
	return engine.Skill{}, false
}

func (s *Server) readSkill(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	d, ok := s.skill(req.Params.URI)
	if !ok {
		return nil, resourceNotFound(req.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: string(skillFile(d))}}}, nil
}

// getPrompt is a Skill as a prompt: its instructions, as activating it returns them.
func (s *Server) getPrompt(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	d, ok := s.skill(skillURI(req.Params.Name))
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no prompt named %q", req.Params.Name)}
	}
	text := fmt.Sprintf("Use the Skill %s (%s).\n\n%s", d.Name, d.Description, d.Instructions)
	return &mcp.GetPromptResult{Description: d.Description, Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
}

// skillEntry is a Skill as skills/list and skills/get show it (SEP-2640).
type skillEntry struct {
	URI         string           `json:"uri"`
	Frontmatter skillFrontMatter `json:"frontmatter"`
	Resources   []skillResource  `json:"resources"`
}

type skillResource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
}

func entryOf(d engine.Skill) skillEntry {
	body := skillFile(d)
	sum := sha256.Sum256(body)
	return skillEntry{URI: skillURI(d.Name), Frontmatter: frontMatter(d),
		Resources: []skillResource{{URI: skillURI(d.Name), Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(body)}}}
}

// extension answers the methods of the Skills extension, which the SDK does not
// know: skills/list (every Skill of the image, one page) and skills/get (one, by its
// SKILL.md URI; -32602 for any other URI). ok is false for every other method.
func (s *Server) extension(m *message) (result any, rpcErr *jsonrpc.Error, ok bool) {
	if m.method != "skills/list" && m.method != "skills/get" {
		return nil, nil, false
	}
	req, _ := m.msg.(*jsonrpc.Request)
	var p struct {
		URI    string `json:"uri"`
		Cursor string `json:"cursor"`
	}
	if req != nil && len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: m.method + ": " + err.Error()}, true
		}
	}
	// The Skills are the image's: a listing holds for the process's life, and is the
	// same for every client of this server.
	type cacheable struct {
		TTLMs      int    `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
		ResultType string `json:"resultType,omitempty"`
	}
	cache := cacheable{TTLMs: 60000, CacheScope: "private"}
	if m.version >= statelessRevision {
		cache.ResultType = "complete"
	}
	if m.method == "skills/get" {
		d, found := s.skill(p.URI)
		if !found {
			data, _ := json.Marshal(map[string]string{"uri": p.URI})
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no skill at %q", p.URI), Data: data}, true
		}
		return struct {
			Skill skillEntry `json:"skill"`
			cacheable
		}{entryOf(d), cache}, nil, true
	}
	docs, err := s.k.SkillDocuments(s.pid)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}, true
	}
	entries := []skillEntry{}
	for _, d := range docs {
		entries = append(entries, entryOf(d))
	}
	return struct {
		Skills []skillEntry `json:"skills"`
		cacheable
	}{entries, cache}, nil, true
}

// extensionResponse is the JSON-RPC response of an extension method, or nil.
func (s *Server) extensionResponse(m *message) *jsonrpc.Response {
	res, rerr, ok := s.extension(m)
	if !ok {
		return nil
	}
	req, _ := m.msg.(*jsonrpc.Request)
	if req == nil || !req.ID.IsValid() {
		return nil
	}
	out := &jsonrpc.Response{ID: req.ID}
	if rerr != nil {
		out.Error = rerr
		return out
	}
	b, err := json.Marshal(res)
	if err != nil {
		out.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		return out
	}
	out.Result = b
	return out
}
