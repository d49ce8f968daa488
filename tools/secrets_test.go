package tools_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// TestSecretsByReference: "Guest code writes a placeholder … in a header; the host
// substitutes the value only when the destination host is one of that secret's hosts,
// otherwise the fetch is refused (secret_not_allowed). The value never enters guest
// memory, the event log, a tool result, a diagnostic or a log line; a response that
// echoes the value back has it redacted before the guest sees it. A test greps the
// store, the logs and every result for the secret's bytes and finds nothing."
func TestSecretsByReference(t *testing.T) {
	const value = "tok-3f9a1c77e2b54d0a-never-in-the-guest"
	t.Setenv("LIBOS_TEST_API_TOKEN", value)
	dir := t.TempDir()
	w := openWorld(t, dir, tools.Config{})

	var mu sync.Mutex
	var seen []string // Authorization headers the API host received
	api := newServer(t, func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		// The response echoes the credential back, in a header and in the body.
		rw.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(rw, `{"you_sent":%q}`, r.Header.Get("Authorization"))
	})
	other := newServer(t, func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "other") })
	img := fetchImage(t, fmt.Sprintf(`net:
  allow: ["%s", "%s"]
  allow_addresses: ["127.0.0.1"]
secrets:
  API_TOKEN: {from_env: LIBOS_TEST_API_TOKEN, hosts: ["%s"]}
`, api.hostport(), other.hostport(), api.hostport()))
	pid := w.spawnWithTool(t, img, "fetcher", fetcherSource)
	const withHeaders = `export async function run(args: any, libos: any) {
  const res = await libos.syscall("net.fetch", { url: args.url, headers: args.headers });
  return { status: res.status, body: res.body, echo: res.headers["x-echo"] ?? null };
}`
	w.register(t, pid, "authed", withHeaders)

	var results []string
	call := func(t *testing.T, url, header string) (string, string) {
		t.Helper()
		out, err := w.call(t, pid, "authed", fmt.Sprintf(`{"url":%q,"headers":{"Authorization":%q}}`, url, header))
		results = append(results, string(out))
		if err != nil {
			results = append(results, err.Error())
		}
		return string(out), codeOf(err)
	}

	t.Run("the placeholder is replaced for the secret's host, and the echo is redacted", func(t *testing.T) {
		out, code := call(t, api.URL+"/me", "Bearer {{secret:API_TOKEN}}")
		if code != "" {
			t.Fatalf("code %s, want success", code)
		}
		mu.Lock()
		got := seen[len(seen)-1]
		mu.Unlock()
		if got != "Bearer "+value {
			t.Fatalf("the host received Authorization %q, want the substituted value", got)
		}
		if strings.Contains(out, value) || !strings.Contains(out, `{{secret:API_TOKEN}}`) {
			t.Fatalf("the echoed value must come back as its placeholder: %s", out)
		}
	})
	// "it never writes a secret value (placeholders stay placeholders)": the tape of
	// a call that sent the secret by reference holds the reference, in the syscall's
	// arguments, in its recorded result and in expected.
	t.Run("an exported tape keeps the placeholder", func(t *testing.T) {
		call, err := w.callID(t, pid, "authed", fmt.Sprintf(`{"url":%q,"headers":{"Authorization":"Bearer {{secret:API_TOKEN}}"}}`, api.URL+"/me"))
		if err != nil {
			t.Fatal(err)
		}
		tc, err := tools.ExportTape(w.st, pid, call)
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		b, _ := json.Marshal(tc)
		results = append(results, string(b))
		if len(tc.Syscalls) != 1 || !strings.Contains(string(tc.Syscalls[0].Args), `"Bearer {{secret:API_TOKEN}}"`) ||
			!strings.Contains(string(tc.Syscalls[0].Result), `{{secret:API_TOKEN}}`) || !strings.Contains(string(tc.Expected), `{{secret:API_TOKEN}}`) {
			t.Fatalf("the exported tape does not keep the placeholder: %s", b)
		}
		if strings.Contains(string(b), value) {
			t.Fatalf("the exported tape holds the secret value: %s", b)
		}
	})
	t.Run("a secret is refused for a host that is not one of its hosts", func(t *testing.T) {
		before := other.hits.Load()
		if _, code := call(t, other.URL+"/", "Bearer {{secret:API_TOKEN}}"); code != syscalls.CodeSecretNotAllowed {
			t.Fatalf("code %s, want %s", code, syscalls.CodeSecretNotAllowed)
		}
		if other.hits.Load() != before {
			t.Fatalf("the other host saw the request")
		}
	})
	t.Run("a secret the image does not declare is refused", func(t *testing.T) {
		if _, code := call(t, api.URL+"/", "Bearer {{secret:HOME}}"); code != syscalls.CodeSecretNotAllowed {
			t.Fatalf("code %s, want %s", code, syscalls.CodeSecretNotAllowed)
		}
	})
	t.Run("a placeholder outside a header is refused, never sent literally", func(t *testing.T) {
		before := api.hits.Load()
		out, err := w.call(t, pid, "fetcher", fmt.Sprintf(`{"url":%q}`, api.URL+"/?t={{secret:API_TOKEN}}"))
		if codeOf(err) != syscalls.CodeSecretNotAllowed || api.hits.Load() != before {
			t.Fatalf("code %s (out %s), server hits %d: want %s and no request", codeOf(err), out, api.hits.Load()-before, syscalls.CodeSecretNotAllowed)
		}
	})

	// The scan: the secret's bytes are nowhere the guest, the log or a reader can see.
	evs := w.events(t, pid)
	for _, e := range evs {
		if bytes.Contains(e.Data, []byte(value)) {
			t.Fatalf("event %d (%s) holds the secret value", e.Seq, e.Type)
		}
	}
	for _, r := range results {
		if strings.Contains(r, value) {
			t.Fatalf("a result or error holds the secret value: %s", r)
		}
	}
	w.close()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("store file %s holds the secret value", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
