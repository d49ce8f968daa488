package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/internal/schemaerr"
	"github.com/agentlibos/libos/jsbundle"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/wasm"
)

// Candidate is a proposed JIT tool as the model wrote it: the arguments of
// propose_jit_tool, and the file format `libos validate` reads.
type Candidate struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	SourceCode   string          `json:"source_code"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	// Tests is a JSON array of {args, expected, syscalls}.
	Tests json.RawMessage `json:"tests"`
}

// Limits bound a proposal. A zero field means its default.
type Limits struct {
	// MaxDescriptionBytes bounds the description. Default 4 KiB.
	MaxDescriptionBytes int
	// MaxSourceBytes bounds the TypeScript source. Default 64 KiB (jsbundle's bound).
	MaxSourceBytes int
	// MaxSchemaBytes bounds each schema, as compact JSON. Default 16 KiB.
	MaxSchemaBytes int
	// MaxTests bounds the number of tests. Default 32.
	MaxTests int
	// MaxTestBytes bounds each test, as compact JSON. Default 16 KiB.
	MaxTestBytes int
	// MaxTapeEntries bounds the syscall tape of each test. Default 100, the sandbox's
	// syscall bound per run (wasm.DefaultSyscalls): a call stopped at that bound
	// exports as a test that validates.
	MaxTapeEntries int
	// MaxDepth bounds the nesting of schemas and test values. Default 32.
	MaxDepth int
}

// Default proposal limits. The kernel's argument limit (engine.Limits.MaxArgumentBytes,
// 64 KiB by default) bounds the whole proposal first.
const (
	DefaultMaxDescriptionBytes = 4 << 10
	DefaultMaxSourceBytes      = jsbundle.DefaultMaxSourceBytes
	DefaultMaxSchemaBytes      = 16 << 10
	DefaultMaxTests            = 32
	DefaultMaxTestBytes        = 16 << 10
	DefaultMaxTapeEntries      = wasm.DefaultSyscalls
	DefaultMaxDepth            = 32
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxDescriptionBytes, DefaultMaxDescriptionBytes)
	def(&l.MaxSourceBytes, DefaultMaxSourceBytes)
	def(&l.MaxSchemaBytes, DefaultMaxSchemaBytes)
	def(&l.MaxTests, DefaultMaxTests)
	def(&l.MaxTestBytes, DefaultMaxTestBytes)
	def(&l.MaxTapeEntries, DefaultMaxTapeEntries)
	def(&l.MaxDepth, DefaultMaxDepth)
	return l
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// candidateFields are the exact top-level fields of a proposal. There is no
// capability-request field: registration grants nothing.
var candidateFields = []string{"name", "description", "source_code", "input_schema", "output_schema", "tests"}

// ParseCandidate decodes a proposal exactly: one JSON object with exactly the six
// fields, no duplicate or case-variant keys, valid UTF-8. It does not check the
// contents; CheckProposal does.
func ParseCandidate(data []byte) (Candidate, error) {
	v, err := jsonexact.Decode(data, 0)
	if err != nil {
		return Candidate{}, errorf(CodeInvalidRequest, "the proposal is not exact JSON: %v", err)
	}
	return candidateOf(v, data)
}

// candidateOf is ParseCandidate for a proposal already decoded into v from data (the
// arguments of propose_jit_tool, decoded once by the adapter): nothing is parsed again.
func candidateOf(v jsonexact.Value, data []byte) (Candidate, error) {
	obj, ok := v.ToAny().(map[string]any)
	if !ok {
		return Candidate{}, errorf(CodeInvalidRequest, "the proposal must be a JSON object, got %s", v.Kind)
	}
	if err := exactFields(obj, candidateFields, candidateFields); err != nil {
		return Candidate{}, err
	}
	// The schemas and tests keep their text as written, compacted.
	_, raw, err := jsonexact.SplitDecoded(v, data)
	if err != nil {
		return Candidate{}, errorf(CodeInvalidRequest, "the proposal: %v", err)
	}
	var c Candidate
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &c.Name}, {"description", &c.Description}, {"source_code", &c.SourceCode}} {
		s, ok := obj[f.key].(string)
		if !ok {
			return Candidate{}, errorf(CodeInvalidRequest, "%q must be a string, got %s", f.key, jsonexact.KindOf(obj[f.key]))
		}
		*f.dst = s
	}
	c.InputSchema = compact(raw["input_schema"])
	c.OutputSchema = compact(raw["output_schema"])
	c.Tests = compact(raw["tests"])
	return c, nil
}

// exactFields refuses unknown keys (naming a case variant of a known one) and
// missing required keys.
func exactFields(obj map[string]any, known, required []string) error {
	var unknown []string
	for k := range obj {
		found := false
		for _, f := range known {
			if k == f {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		k := unknown[0]
		for _, f := range known {
			if strings.EqualFold(k, f) {
				return errorf(CodeInvalidRequest, "unknown field %q (keys are case-sensitive: the field is %q)", k, f)
			}
		}
		return errorf(CodeInvalidRequest, "unknown field %q: the fields are %s", k, strings.Join(known, ", "))
	}
	for _, f := range required {
		if _, ok := obj[f]; !ok {
			return errorf(CodeInvalidRequest, "missing field %q", f)
		}
	}
	return nil
}

func compact(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}

// proposal is a candidate after CheckProposal: schemas compiled, tests decoded.
type proposal struct {
	in, out       *jsonschema.Schema
	inDoc, outDoc any
	tests         []testCase
}

type testCase struct {
	args json.RawMessage // compact JSON object
	// argsDoc is args as the test's decoding holds them, handed to the sandbox so that
	// it does not parse them again (wasm.Engine.RunDoc).
	argsDoc  jsonexact.Doc
	argsV    any
	expected any
	// expectErr is the code of the refusal the test expects instead of a value
	// (expected_error), or "".
	expectErr string
	tape      []syscalls.TapeEntry
}

// CheckProposal runs the checks propose_jit_tool makes before it persists anything:
// the name (^[A-Za-z0-9_-]{1,64}$, never run_jit_tool), the sizes of description,
// source, schemas, tests and tapes (lim, zero fields default), that both schemas are
// exact JSON and compile as JSON Schema 2020-12 without loading any $ref from
// elsewhere (the input schema's root must declare "type":"object": tool arguments are
// always objects), and that every test is {args, expected, syscalls} with tape
// entries of the documented form. It does not compile or run the source, and it does
// not know the process: collisions with process tools are the caller's check.
// Failures are *Error values with codes invalid_name, reserved_name, limit_exceeded,
// invalid_schema, invalid_test or invalid_request.
func CheckProposal(c Candidate, lim Limits) error {
	if _, err := checkProposal(c, lim.withDefaults()); err != nil {
		return err
	}
	return nil
}

func checkProposal(c Candidate, lim Limits) (*proposal, *Error) {
	switch {
	case c.Name == engine.RunJITTool:
		return nil, errorf(CodeReservedName, "%s is reserved for the multiplexed projection and is never a tool name", engine.RunJITTool)
	case !nameRE().MatchString(c.Name):
		return nil, errorf(CodeInvalidName, "name %q must match %s", liberr.Clip(c.Name, 80), nameRE())
	case strings.TrimSpace(c.Description) == "":
		return nil, errorf(CodeInvalidRequest, "description must say what the tool does")
	case !utf8.ValidString(c.Description) || !utf8.ValidString(c.SourceCode):
		return nil, errorf(CodeInvalidRequest, "description and source_code must be valid UTF-8")
	case len(c.Description) > lim.MaxDescriptionBytes:
		return nil, errorf(CodeLimitExceeded, "description is %d bytes; the limit is %d", len(c.Description), lim.MaxDescriptionBytes)
	case len(c.SourceCode) > lim.MaxSourceBytes:
		return nil, errorf(CodeLimitExceeded, "source_code is %d bytes; the limit is %d", len(c.SourceCode), lim.MaxSourceBytes)
	}
	p := &proposal{}
	var err *Error
	if p.in, p.inDoc, err = compileSchema("input_schema", c.InputSchema, lim); err != nil {
		return nil, err
	}
	if tp, _ := p.inDoc.(map[string]any)["type"].(string); tp != "object" {
		return nil, errorf(CodeInvalidSchema, `input_schema: the root must declare "type":"object" (tool arguments are always a JSON object)`)
	}
	if msg := paramHeaderProblem(p.inDoc.(map[string]any), "", map[string]bool{}); msg != "" {
		return nil, errorf(CodeInvalidSchema, "input_schema: %s", msg)
	}
	if p.out, p.outDoc, err = compileSchema("output_schema", c.OutputSchema, lim); err != nil {
		return nil, err
	}
	if p.tests, err = parseTests(c.Tests, lim); err != nil {
		return nil, err
	}
	return p, nil
}

// noLoader refuses every URL: a candidate's schema never makes the runtime fetch a
// remote (or local file) $ref. The JSON Schema meta-schemas are built in.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s is not loaded: a schema must be self-contained", url)
}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

func compileSchema(which string, raw json.RawMessage, lim Limits) (*jsonschema.Schema, any, *Error) {
	if len(raw) == 0 {
		return nil, nil, errorf(CodeInvalidSchema, "%s is missing", which)
	}
	if len(raw) > lim.MaxSchemaBytes {
		return nil, nil, errorf(CodeLimitExceeded, "%s is %d bytes; the limit is %d", which, len(raw), lim.MaxSchemaBytes)
	}
	doc, err := jsonexact.DecodeAny(raw, lim.MaxDepth)
	if err != nil {
		return nil, nil, errorf(CodeInvalidSchema, "%s is not exact JSON: %v", which, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, errorf(CodeInvalidSchema, "%s must be a JSON object, got %s", which, jsonexact.KindOf(doc))
	}
	if s, ok := obj["$schema"]; ok && s != draft2020 && s != draft2020+"#" {
		return nil, nil, errorf(CodeInvalidSchema, "%s: $schema %s is not JSON Schema 2020-12 (%s)", which, jsonexact.Short(s, 120), draft2020)
	}
	key := schemaKey(which, doc)
	if s, ok := schemaMemo.get(key); ok && key != "" {
		return s, doc, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "urn:libos:candidate:" + which
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, errorf(CodeInvalidSchema, "%s: %s", which, liberr.Clip(err.Error(), 512))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, nil, errorf(CodeInvalidSchema, "%s does not compile as JSON Schema 2020-12: %s", which, liberr.Clip(schemaerr.Canonical(err).Error(), 512))
	}
	if key != "" {
		schemaMemo.put(key, s)
	}
	return s, doc, nil
}

var (
	testFields   = []string{"args", "expected", "expected_error", "syscalls"}
	testRequired = []string{"args", "syscalls"}
	errorCodeRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })
)

func parseTests(raw json.RawMessage, lim Limits) ([]testCase, *Error) {
	if len(raw) == 0 {
		return nil, errorf(CodeInvalidTest, "tests is missing (use [] for none)")
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, errorf(CodeInvalidTest, "tests must be a JSON array of {args, expected, syscalls}")
	}
	if len(items) > lim.MaxTests {
		return nil, errorf(CodeLimitExceeded, "%d tests; the limit is %d", len(items), lim.MaxTests)
	}
	out := make([]testCase, len(items))
	for i, item := range items {
		if len(item) > lim.MaxTestBytes {
			return nil, errorf(CodeLimitExceeded, "test %d is %d bytes; the limit is %d", i, len(item), lim.MaxTestBytes)
		}
		tc, err := parseTest(item, lim)
		if err != nil {
			err.Message = fmt.Sprintf("test %d: %s", i, err.Message)
			return nil, err
		}
		out[i] = tc
	}
	return out, nil
}

func parseTest(item json.RawMessage, lim Limits) (testCase, *Error) {
	// The test is decoded once; its members' texts and its tape come from that decoding.
	val, err := jsonexact.Decode(item, lim.MaxDepth)
	if err != nil {
		return testCase{}, errorf(CodeInvalidTest, "not exact JSON: %v", err)
	}
	v := val.ToAny()
	obj, ok := v.(map[string]any)
	if !ok {
		return testCase{}, errorf(CodeInvalidTest, "a test is a JSON object {args, expected, syscalls}, got %s", jsonexact.KindOf(v))
	}
	if e := exactFields(obj, testFields, testRequired); e != nil {
		te, _ := own(e)
		te.Code = CodeInvalidTest
		return testCase{}, te
	}
	_, raw, err := jsonexact.SplitDecoded(val, item) // compact member texts
	if err != nil {
		return testCase{}, errorf(CodeInvalidTest, "%v", err)
	}
	if _, ok := obj["args"].(map[string]any); !ok {
		return testCase{}, errorf(CodeInvalidTest, `"args" must be a JSON object (tool arguments are always an object), got %s`, jsonexact.KindOf(obj["args"]))
	}
	argsVal, _ := val.Get("args")
	argsDoc, err := jsonexact.Encode(*argsVal, lim.MaxDepth)
	if err != nil {
		return testCase{}, errorf(CodeInvalidTest, `"args": %v`, err)
	}
	tc := testCase{args: raw["args"], argsDoc: argsDoc, argsV: obj["args"], expected: obj["expected"]}
	_, hasExpected := obj["expected"]
	expErr, hasErr := obj["expected_error"]
	switch {
	case hasExpected && hasErr:
		return testCase{}, errorf(CodeInvalidTest, `a test has "expected" (the returned value) or "expected_error" (the refusal), not both`)
	case !hasExpected && !hasErr:
		return testCase{}, errorf(CodeInvalidTest, `missing field "expected" (the returned value; or "expected_error" for an expected refusal)`)
	case hasErr:
		m, ok := expErr.(map[string]any)
		code, _ := m["code"].(string)
		if !ok || len(m) != 1 || !errorCodeRE().MatchString(code) {
			return testCase{}, errorf(CodeInvalidTest, `"expected_error" must be {"code": "<error code>"}, the code the call fails with`)
		}
		// A call fails only with a code of the module's one registry: a test that
		// expects any other could never pass.
		if _, ok := liberr.Lookup(Code(code)); !ok {
			return testCase{}, errorf(CodeInvalidTest, `"expected_error" code %q is not an error code a call can fail with (ERRORS.md lists them)`, code)
		}
		tc.expectErr = code
	}
	if _, ok := obj["syscalls"].([]any); !ok {
		return testCase{}, errorf(CodeInvalidTest, `"syscalls" must be an array of tape entries, got %s`, jsonexact.KindOf(obj["syscalls"]))
	}
	sys, _ := val.Get("syscalls")
	tape, err := syscalls.ParseTapeDecoded(*sys, raw["syscalls"])
	if err != nil {
		return testCase{}, errorf(CodeInvalidTest, "syscalls: %s", syscallText(err))
	}
	if len(tape) > lim.MaxTapeEntries {
		return testCase{}, errorf(CodeLimitExceeded, "the tape has %d entries; the limit is %d", len(tape), lim.MaxTapeEntries)
	}
	tc.tape = tape
	return tc, nil
}

// paramHeaderProblem checks the x-mcp-header annotations of an input schema's
// properties, at any depth of properties: MCP over HTTP mirrors such an argument
// into the header Mcp-Param-<value> (SEP-2243), so the value must be a non-empty
// HTTP token (RFC 9110 tchar), on a property of type string, integer or boolean,
// and unique without regard to case. It returns the first problem, or "".
func paramHeaderProblem(schema map[string]any, at string, seen map[string]bool) string {
	props, _ := schema["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		prop, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		path := at + name
		if h, has := prop["x-mcp-header"]; has {
			hs, _ := h.(string)
			switch tp, _ := prop["type"].(string); {
			case tp != "string" && tp != "integer" && tp != "boolean":
				return fmt.Sprintf("property %q: x-mcp-header needs \"type\" string, integer or boolean", path)
			case hs == "":
				return fmt.Sprintf("property %q: x-mcp-header must be a non-empty string", path)
			case strings.IndexFunc(hs, func(r rune) bool { return !isTChar(r) }) >= 0:
				return fmt.Sprintf("property %q: x-mcp-header %q is not an HTTP token (letters, digits and !#$%%&'*+-.^_`|~ only)", path, liberr.Clip(hs, 80))
			case seen[strings.ToLower(hs)]:
				return fmt.Sprintf("property %q: x-mcp-header %q is used twice (header names ignore case)", path, liberr.Clip(hs, 80))
			}
			seen[strings.ToLower(hs)] = true
		}
		if msg := paramHeaderProblem(prop, path+".", seen); msg != "" {
			return msg
		}
	}
	return ""
}

func isTChar(r rune) bool {
	return r < 128 && (r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}
