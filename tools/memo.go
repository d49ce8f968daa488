package tools

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentlibos/libos/jsbundle"
)

// memo remembers up to max values computed from a key, for pure computations that a
// validation repeats: a model revising a candidate resubmits the same schemas and often the
// same source, and CI validates many candidates that share schemas. When full it forgets
// everything, which bounds its memory without bookkeeping. Safe for concurrent use.
type memo[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func (c *memo[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]V, c.max)
	}
	c.m[key] = v
}

// schemaMemo holds compiled schemas by their canonical text (keys sorted, numbers as
// written, no white space), so that the same schema written differently compiles once.
// A compiled schema is immutable and safe for concurrent validation. Only schemas that
// compiled are kept: an error is recomputed, with its message.
var schemaMemo = memo[*jsonschema.Schema]{max: 128}

// schemaKey is which schema slot (its location appears in what the schema reports) and
// the canonical text of doc, or "" when doc has none.
func schemaKey(which string, doc any) string {
	b, err := json.Marshal(doc)
	if err != nil {
		return ""
	}
	return which + "\x00" + string(b)
}

// compiledSource is what jsbundle.Compile returned for one source.
type compiledSource struct {
	prog  *jsbundle.Program
	diags []jsbundle.Diagnostic
}

// compileMemo holds jsbundle's result by source text and options: the transform and the
// static checks are a pure function of them, so a source validated again (a candidate
// revised only in its tests or schemas, a CI rerun in one process) is not transformed
// again. The Program and diagnostics are only read by their users.
var compileMemo = memo[compiledSource]{max: 64}

func compileSource(src string, opts jsbundle.Options) (*jsbundle.Program, []jsbundle.Diagnostic) {
	key := sourceKey(src, opts)
	if c, ok := compileMemo.get(key); ok {
		return c.prog, c.diags
	}
	prog, diags := jsbundle.Compile(src, opts)
	compileMemo.put(key, compiledSource{prog, diags})
	return prog, diags
}

// sourceKey is compileMemo's key: every option is in it, whatever fields Options grows.
func sourceKey(src string, opts jsbundle.Options) string {
	return fmt.Sprintf("%#v", opts) + "\x00" + src
}

func (c *memo[V]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
