package syscalls

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones without a system tz database (air-gapped hosts)
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/jsonexact"
	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// provider is the code behind a route. It gets arguments that already passed the
// route's schema and an authorised caller; it returns the result as JSON text.
type provider struct {
	name string
	run  func(ctx context.Context, c *call) (json.RawMessage, error)
	// direct is set for providers whose effects happen while they run (tools.call);
	// every other provider only stages its writes, which the router commits together
	// with the audit event.
	direct bool
	// external is set for providers whose effects happen outside the store (the
	// network, files, another system). Before such a provider runs, the router syncs
	// the store (store.Sync), so that everything written before the effect — the
	// call's tool_called, its budget charges, earlier audit events — survives any
	// crash the effect survives. Effects inside the store need no such sync: they are
	// later in the store's log than all of that. A new provider that reaches outside
	// the store must set it; no route of the table needs it yet.
	external bool
	// nests is set for providers that run another tool (tools.call): the router
	// refuses a call past the nesting bound as its own "depth" decision.
	nests bool
}

// call is one authorised syscall on its way to a provider.
type call struct {
	router *Router
	caller *Caller
	route  *route
	raw    json.RawMessage // the arguments as received ("{}" for none)
	value  jsonexact.Value // raw, decoded once at the boundary
	args   map[string]any  // value as a map, numbers as json.Number
	fields map[string]json.RawMessage
	// writes are committed atomically with the call's audit event, and only if the
	// call succeeds.
	writes []func(tx *store.Tx) error
	// ev is the call's audit event, for what a route records of its own (Net, Labels).
	ev *auditEvent
	// fetch is net.fetch's plan, made by its policy stage.
	fetch *fetchPlan
	// taint is the set of labels the call (and the calls it belongs to) has seen.
	taint *taint
}

func (c *call) str(key string) string {
	s, _ := c.args[key].(string)
	return s
}

// rawField returns one top-level argument as its exact JSON text, compacted (numbers
// keep their spelling, strings their escapes). It splits the text along the value the
// boundary decoded: nothing is parsed again.
func (c *call) rawField(key string) (json.RawMessage, error) {
	if c.fields == nil {
		_, fields, err := jsonexact.SplitDecoded(c.value, c.raw)
		if err != nil {
			return nil, err
		}
		c.fields = fields
	}
	f, ok := c.fields[key]
	if !ok {
		return nil, fmt.Errorf("syscalls: no argument %q", key)
	}
	return f, nil
}

func argErr(c *call, msg string) error {
	return errorf(CodeArgumentInvalid, c.route.name+": "+msg, nil)
}

// --- clock ---

var clockNow = provider{name: "clock", run: runClockNow}

// zones caches loaded locations; only names that loaded are kept, so the cache is
// bounded by the tz database.
var zones sync.Map // string → *time.Location

func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	// "Local" would reveal the host's zone and is not an IANA name.
	if name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	zones.Store(name, l)
	return l, nil
}

// isoLayout always writes a numeric offset (+00:00, never Z), as in the clock example of the JIT authoring Skill.
const isoLayout = "2006-01-02T15:04:05-07:00"

func runClockNow(_ context.Context, c *call) (json.RawMessage, error) {
	tz := c.str("timezone")
	loc, err := loadZone(tz)
	if err != nil {
		return nil, argErr(c, err.Error())
	}
	now := c.router.clock.Now().In(loc)
	return json.Marshal(struct {
		ISO8601     string `json:"iso8601"`
		UnixSeconds int64  `json:"unix_seconds"`
		Timezone    string `json:"timezone"`
	}{now.Format(isoLayout), now.Unix(), tz})
}

// --- kv ---

var (
	kvGet    = provider{name: "kv", run: runKVGet}
	kvPut    = provider{name: "kv", run: runKVPut}
	kvDelete = provider{name: "kv", run: runKVDelete}
	kvList   = provider{name: "kv", run: runKVList}
)

// kvKey checks what the schema cannot: the byte length, and that the key holds no
// U+FFFD. The boundary's exact decoder already refuses invalid UTF-8 and lone
// surrogates; U+FFFD is what any lossy decoder between the guest and the store would
// leave of such a key, so a key holding one is refused rather than trusted to be the
// key the guest meant (two different guest keys must never meet).
func kvKey(c *call, key string) (string, error) {
	if len(key) == 0 || len(key) > MaxKVKeyBytes {
		return "", argErr(c, fmt.Sprintf("key must be 1..%d bytes", MaxKVKeyBytes))
	}
	if !utf8.ValidString(key) || strings.ContainsRune(key, utf8.RuneError) {
		return "", argErr(c, "key must be valid UTF-8 text (U+FFFD is not allowed)")
	}
	return key, nil
}

func runKVGet(ctx context.Context, c *call) (json.RawMessage, error) {
	key, err := kvKey(c, c.str("key"))
	if err != nil {
		return nil, err
	}
	val, err := c.router.store.KVGet(c.caller.PID, key)
	if errors.Is(err, store.ErrNotFound) {
		return json.RawMessage(`{"found":false,"value":null}`), nil
	}
	if err != nil {
		return nil, err
	}
	// The value carries its namespace's labels and the ones it was written with.
	stored, err := c.router.store.KVLabels(c.caller.PID, key)
	if err != nil {
		return nil, err
	}
	c.noteLabels(append(c.caller.Policy.kvLabels(key), stored...))
	if !json.Valid(val) {
		return nil, fmt.Errorf("stored value of %q is not JSON", key)
	}
	out := make([]byte, 0, len(val)+32)
	out = append(out, `{"found":true,"value":`...)
	out = append(out, val...)
	return append(out, '}'), nil
}

func runKVPut(ctx context.Context, c *call) (json.RawMessage, error) {
	key, err := kvKey(c, c.str("key"))
	if err != nil {
		return nil, err
	}
	val, err := c.rawField("value")
	if err != nil {
		return nil, argErr(c, "value is not JSON")
	}
	if len(val) > MaxKVValueBytes {
		return nil, argErr(c, fmt.Sprintf("value is %d bytes of JSON; at most %d are stored", len(val), MaxKVValueBytes))
	}
	pid := c.caller.PID
	// The value keeps the labels its call had seen, so they survive storage.
	labels := c.taint.list()
	c.writes = append(c.writes, func(tx *store.Tx) error {
		if err := tx.KVPut(pid, key, val); err != nil {
			return err
		}
		return tx.KVSetLabels(pid, key, labels)
	})
	return json.RawMessage(`{}`), nil
}

func runKVDelete(ctx context.Context, c *call) (json.RawMessage, error) {
	key, err := kvKey(c, c.str("key"))
	if err != nil {
		return nil, err
	}
	// Whether the key exists is read now; the delete is committed with the audit event.
	_, err = c.router.store.KVGet(c.caller.PID, key)
	deleted := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	pid := c.caller.PID
	c.writes = append(c.writes, func(tx *store.Tx) error {
		_, err := tx.KVDelete(pid, key)
		return err
	})
	return json.Marshal(struct {
		Deleted bool `json:"deleted"`
	}{deleted})
}

// Cursors are opaque to the guest: a version letter and the last key returned, in
// base64url. A cursor only ever resumes within its own prefix of the caller's own space.
const cursorVersion = "k"

func encodeCursor(after string) string {
	return cursorVersion + base64.RawURLEncoding.EncodeToString([]byte(after))
}

func decodeCursor(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, cursorVersion)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) == 0 || len(b) > MaxKVKeyBytes || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

func runKVList(ctx context.Context, c *call) (json.RawMessage, error) {
	prefix := c.str("prefix")
	if len(prefix) > MaxKVKeyBytes {
		return nil, argErr(c, fmt.Sprintf("prefix must be at most %d bytes", MaxKVKeyBytes))
	}
	limit := DefaultKVListLimit
	if n, ok := c.args["limit"].(json.Number); ok {
		v, err := strconv.Atoi(string(n))
		if err != nil {
			// The schema allows 1.0; it is still an integer.
			f, ferr := n.Float64()
			if ferr != nil {
				return nil, argErr(c, "limit is not an integer")
			}
			v = int(f)
		}
		limit = v
	}
	var after string
	if cur, ok := c.args["cursor"].(string); ok {
		a, ok := decodeCursor(cur)
		if !ok || !strings.HasPrefix(a, prefix) {
			return nil, argErr(c, "cursor is not one this prefix returned")
		}
		after = a
	}
	entries, more, err := c.router.store.KVList(c.caller.PID, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
		// Key names are data too: a listing carries the labels of what it lists.
		stored, err := c.router.store.KVLabels(c.caller.PID, e.Key)
		if err != nil {
			return nil, err
		}
		c.noteLabels(append(c.caller.Policy.kvLabels(e.Key), stored...))
	}
	var next *string
	if more != "" {
		s := encodeCursor(more)
		next = &s
	}
	return json.Marshal(struct {
		Keys       []string `json:"keys"`
		NextCursor *string  `json:"next_cursor"`
	}{keys, next})
}

// --- tools ---

var toolsCall = provider{name: "tools", run: runToolsCall, direct: true, nests: true}

func runToolsCall(ctx context.Context, c *call) (json.RawMessage, error) {
	depth := c.caller.Depth + 1 // the router has checked it against the bound
	if c.caller.Tools == nil {
		return nil, errorf(CodeProviderFailed, "tools.call: no tool caller is available to this process", nil)
	}
	args, err := c.rawField("arguments")
	if err != nil {
		return nil, argErr(c, "arguments is not JSON")
	}
	// The called tool shares this call's taint: it starts with its labels, and what it
	// sees comes back with its result.
	ctx = context.WithValue(ctx, taintKey{}, c.taint)
	var out json.RawMessage
	if vt, ok := c.caller.Tools.(ValueToolCaller); ok {
		// The arguments were decoded at the boundary; their value goes down with them.
		value, _ := c.value.Get("arguments")
		out, err = vt.CallToolValue(ctx, c.caller.PID, c.str("tool"), args, *value, depth)
	} else {
		out, err = c.caller.Tools.CallTool(ctx, c.caller.PID, c.str("tool"), args, depth)
	}
	// The result carries every label the called tool could have seen: the shared
	// taint, as it is now. The journal and tape export read them from this event.
	c.noteLabels(c.taint.list())
	if err != nil {
		// The engine's errors carry a stable code meant for the model (unknown_tool,
		// schema_invalid, …): keep it, so the guest sees the same code the model would.
		var se *Error
		var coded interface{ ErrorCode() string }
		if !errors.As(err, &se) && errors.As(err, &coded) && coded.ErrorCode() != "" {
			return nil, errorf(liberr.Code(coded.ErrorCode()), err.Error(), err)
		}
	}
	return out, err
}
