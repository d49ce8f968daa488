package syscalls

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseTape: any bytes either parse into entries, or fail with tape_invalid; NewTape
// accepts parsed entries or refuses them with tape_invalid (an entry that answers what
// its route never could). Never a panic, never an untyped error.
func FuzzParseTape(f *testing.F) {
	for _, s := range []string{
		`[{"name":"clock.now","args":{"timezone":"UTC"},"result":{"iso8601":"x"}}]`,
		`[{"name":"kv.get","payload":1},{"name":"a.b","ok":false,"error":{"code":"c","message":"m"}}]`,
		`[{"name":"a.b","ok":false,"error":"boom"}]`, `[]`, `null`, `[1]`, `[{"name":""}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseTape(data)
		if err != nil {
			if !errors.Is(err, ErrTapeInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := NewTape(es); err != nil && !errors.Is(err, ErrTapeInvalid) {
			t.Fatalf("NewTape: untyped error %v", err)
		}
	})
}

// FuzzRouterArgs: whatever a guest sends, the router answers with a result or a typed
// error, and audits it.
func FuzzRouterArgs(f *testing.F) {
	r, s := newRouter(f, RouterConfig{})
	caps := NewCapSet(CapClockNow, CapKVRead, CapKVWrite)
	for _, c := range []struct{ name, args string }{
		{"clock.now", `{"timezone":"UTC"}`}, {"kv.put", `{"key":"a","value":[1,{"b":null}]}`},
		{"kv.list", `{"prefix":"a","limit":3,"cursor":"kYQ"}`}, {"kv.get", `{"key":"a","key":"b"}`},
		{"clock.now", `{"timezone":"` + "\xff" + `"}`}, {"nope", `{}`},
	} {
		f.Add(c.name, []byte(c.args))
	}
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		before := auditCount(t, s, "fz")
		res, err := r.For(Caller{PID: "fz", Capabilities: caps}).Syscall(context.Background(), name, args)
		var se *Error
		switch {
		case err == nil:
			if !json.Valid(res) {
				t.Fatalf("result is not JSON: %q", res)
			}
		case !errors.As(err, &se) || se.Code == "":
			t.Fatalf("untyped error %v", err)
		}
		if auditCount(t, s, "fz") != before+1 {
			t.Fatalf("not audited")
		}
	})
}

// FuzzRedact: redaction reads any text without failing, and what it returns never
// holds the secret as it is (a secret with a brace, or inside the placeholder's own
// text, could be spelled by a placeholder and its neighbour, and is left out).
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", "%", "%2", "%25", "%2525", "%252", "\\", "\\u", "\\\\u00", "+", "cGFzcyB3b3Jk", "pass word"} {
		f.Add(s, "pass word")
	}
	f.Fuzz(func(t *testing.T, text, secret string) {
		if secret == "" || strings.ContainsAny(secret, "{}") || strings.Contains("{{secret:S}}", secret) {
			return
		}
		got := redactString(text, []redaction{{value: secret, name: "S"}})
		if strings.Contains(got, secret) {
			t.Fatalf("redactString(%q) = %q holds the secret %q", text, got, secret)
		}
	})
}
