package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/engine/image"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// countingServer is a real HTTP server on 127.0.0.1 that counts the requests it sees.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t testing.TB, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// hostport is the server's 127.0.0.1:port.
func (s *countingServer) hostport() string { return s.Listener.Addr().String() }

// port is the server's port.
func (s *countingServer) port() string {
	_, p, _ := strings.Cut(s.hostport(), ":")
	return p
}

// fetcherSource is a JIT tool that passes its arguments to net.fetch and returns the
// response, so each test case is one model call through the whole pipeline.
const fetcherSource = `export async function run(args: any, libos: any) {
  const req: any = { url: args.url };
  if (args.method) req.method = args.method;
  if (args.headers) req.headers = args.headers;
  if (args.body) req.body = args.body;
  const res = await libos.syscall("net.fetch", req);
  return { status: res.status, body: res.body, url: res.url };
}`

// fetchImage is an image whose only route policy is yaml (net, secrets, labels, …).
func fetchImage(t testing.TB, policy string) *image.Image {
	t.Helper()
	manifest := "format: libos.image/v1\nname: egress\nversion: 1.0.0\n" +
		"tools: [echo, propose_jit_tool, validate_jit_tool, register_jit_tool]\n" +
		"capabilities: [net:fetch, kv:read, kv:write, tools:call]\n" + policy
	img, err := image.ParseImage([]byte(manifest), nil)
	if err != nil {
		t.Fatalf("image: %v\n%s", err, manifest)
	}
	return img
}

// spawnWithTool spawns a process of img and registers source as a JIT tool name.
func (w *world) spawnWithTool(t testing.TB, img *image.Image, name, source string) string {
	t.Helper()
	pid, err := w.k.SpawnImage(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	w.register(t, pid, name, source)
	return pid
}

// register registers source as the JIT tool name of pid, with open schemas.
func (w *world) register(t testing.TB, pid, name, source string) {
	t.Helper()
	obj := candidateJSON(t, "good_clock_now.json")
	obj = withField(t, obj, "name", jsonString(name))
	obj = withField(t, obj, "source_code", jsonString(source))
	obj = withField(t, obj, "input_schema", `{"type":"object"}`)
	obj = withField(t, obj, "output_schema", `{"type":"object"}`)
	obj = withField(t, obj, "tests", `[]`)
	w.mustCall(t, pid, tools.RegisterName, idArg(w.propose(t, pid, obj)))
}

// syscallEvents returns the data of the syscall audit events of route after n events.
func syscallEvents(t testing.TB, evs []store.Event, route string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range evs {
		if e.Type != syscalls.EventSyscall {
			continue
		}
		if d := data(t, e); d["route"] == route {
			out = append(out, d)
		}
	}
	return out
}

// TestNetFetchThroughThePipeline: net.fetch is "deny by default: an image grants hosts
// explicitly … no allow-list means every fetch is refused", its URL "parsed strictly
// (userinfo, IP literals in odd forms, IDNA, trailing dots, ports) and the host
// compared in canonical form", with "the address actually connected to … checked after
// DNS resolution", redirects "followed only to allowed hosts and at most N times", and
// every decision "audited with method, host, path, status, sizes and duration (never
// bodies …)". Each case is one model call of a registered JIT tool against real HTTP
// servers on 127.0.0.1; for every refusal the server saw no request.
func TestNetFetchThroughThePipeline(t *testing.T) {
	w := newWorld(t)
	forbidden := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "forbidden host reached") })
	var allowed *countingServer
	allowed = newServer(t, func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/data":
			rw.Header().Set("Content-Type", "application/json")
			io.WriteString(rw, `{"items":[1,2,3]}`)
		case "/big":
			io.WriteString(rw, strings.Repeat("x", 4096))
		case "/slow":
			<-r.Context().Done() // answers never; returns when the client gives up
		case "/to-forbidden":
			http.Redirect(rw, r, forbidden.URL+"/", http.StatusFound)
		case "/to-self":
			http.Redirect(rw, r, "/data", http.StatusFound)
		case "/loop":
			http.Redirect(rw, r, "/loop", http.StatusFound)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(rw, "%s %d", r.Method, len(b))
		default:
			http.NotFound(rw, r)
		}
	})
	img := fetchImage(t, fmt.Sprintf(`net:
  allow: ["localhost:%[1]s", "%[2]s"]
  methods: [GET, POST]
  max_request_bytes: 100
  max_response_bytes: 1000
  timeout: 300ms
  max_redirects: 2
  allow_addresses: ["127.0.0.1", "::1"]
`, allowed.port(), allowed.hostport()))
	pid := w.spawnWithTool(t, img, "fetcher", fetcherSource)
	noLoopback := fetchImage(t, fmt.Sprintf("net:\n  allow: [\"localhost:%s\"]\n", allowed.port()))
	pidNoLoopback := w.spawnWithTool(t, noLoopback, "fetcher", fetcherSource)
	noNet := fetchImage(t, "")
	pidNoNet := w.spawnWithTool(t, noNet, "fetcher", fetcherSource)

	cases := []struct {
		rule   string
		pid    string
		args   map[string]any
		want   string // code; "" is success
		server *countingServer
		body   string // the response body, on success
	}{
		{rule: "an allowed host is reached", pid: pid, args: map[string]any{"url": allowed.URL + "/data"}, server: allowed, body: `{"items":[1,2,3]}`},
		{rule: "an allowed name is reached at its vetted address", pid: pid, args: map[string]any{"url": "http://localhost:" + allowed.port() + "/data"}, server: allowed, body: `{"items":[1,2,3]}`},
		{rule: "the host is compared in canonical form (case, trailing dot)", pid: pid, args: map[string]any{"url": "HTTP://LocalHost.:" + allowed.port() + "/data"}, server: allowed, body: `{"items":[1,2,3]}`},
		{rule: "a redirect to an allowed host is followed", pid: pid, args: map[string]any{"url": allowed.URL + "/to-self"}, server: allowed, body: `{"items":[1,2,3]}`},
		{rule: "an allowed method with a body within bounds", pid: pid, args: map[string]any{"url": allowed.URL + "/post", "method": "POST", "body": "hello"}, server: allowed, body: "POST 5"},

		{rule: "no allow-list means every fetch is refused", pid: pidNoNet, args: map[string]any{"url": allowed.URL + "/data"}, want: syscalls.CodeHostNotAllowed, server: allowed},
		{rule: "a host outside the allow-list is refused", pid: pid, args: map[string]any{"url": forbidden.URL + "/"}, want: syscalls.CodeHostNotAllowed, server: forbidden},
		{rule: "an allowed host on another port is another host", pid: pid, args: map[string]any{"url": "http://localhost:1/"}, want: syscalls.CodeHostNotAllowed, server: allowed},
		{rule: "a method the image does not list is refused", pid: pid, args: map[string]any{"url": allowed.URL + "/post", "method": "DELETE"}, want: syscalls.CodeMethodNotAllowed, server: allowed},
		{rule: "a request body over max_request_bytes is refused before it is sent", pid: pid, args: map[string]any{"url": allowed.URL + "/post", "method": "POST", "body": strings.Repeat("y", 101)}, want: syscalls.CodeRequestTooLarge, server: allowed},
		{rule: "a response over max_response_bytes is refused", pid: pid, args: map[string]any{"url": allowed.URL + "/big"}, want: syscalls.CodeResponseTooLarge},
		{rule: "a server slower than the fetch's time limit", pid: pid, args: map[string]any{"url": allowed.URL + "/slow"}, want: syscalls.CodeFetchTimeout},
		{rule: "a redirect to a disallowed host is refused", pid: pid, args: map[string]any{"url": allowed.URL + "/to-forbidden"}, want: syscalls.CodeHostNotAllowed, server: forbidden},
		{rule: "redirects are followed at most max_redirects times", pid: pid, args: map[string]any{"url": allowed.URL + "/loop"}, want: syscalls.CodeTooManyRedirects},
		{rule: "a name that resolves to loopback is refused when loopback is not allowed", pid: pidNoLoopback, args: map[string]any{"url": "http://localhost:" + allowed.port() + "/data"}, want: syscalls.CodeAddressNotAllowed, server: allowed},
		{rule: "IP literal in hex form is refused, not interpreted", pid: pid, args: map[string]any{"url": "http://0x7f.1:" + allowed.port() + "/data"}, want: syscalls.CodeURLInvalid, server: allowed},
		{rule: "IP literal as one number is refused, not interpreted", pid: pid, args: map[string]any{"url": "http://2130706433:" + allowed.port() + "/data"}, want: syscalls.CodeURLInvalid, server: allowed},
		{rule: "IP literal in octal form is refused, not interpreted", pid: pid, args: map[string]any{"url": "http://0177.0.0.1:" + allowed.port() + "/data"}, want: syscalls.CodeURLInvalid, server: allowed},
		{rule: "an IPv4-mapped IPv6 literal is compared as the IPv4 it maps", pid: pidNoLoopback, args: map[string]any{"url": "http://[::ffff:127.0.0.1]:" + allowed.port() + "/data"}, want: syscalls.CodeHostNotAllowed, server: allowed},
		{rule: "userinfo tricks are refused (allowed@evil)", pid: pid, args: map[string]any{"url": "http://localhost:" + allowed.port() + "@" + forbidden.hostport() + "/"}, want: syscalls.CodeURLInvalid, server: forbidden},
		{rule: "a backslash in the authority is refused", pid: pid, args: map[string]any{"url": "http://" + forbidden.hostport() + "\\@localhost:" + allowed.port() + "/"}, want: syscalls.CodeURLInvalid, server: forbidden},
		{rule: "only http and https", pid: pid, args: map[string]any{"url": "file:///etc/passwd"}, want: syscalls.CodeURLInvalid},
		{rule: "a percent-escaped host is refused", pid: pid, args: map[string]any{"url": "http://%6cocalhost:" + allowed.port() + "/data"}, want: syscalls.CodeURLInvalid, server: allowed},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			var before int64
			if tc.server != nil {
				before = tc.server.hits.Load()
			}
			nEvents := len(w.events(t, tc.pid))
			args, _ := json.Marshal(tc.args)
			out, err := w.call(t, tc.pid, "fetcher", string(args))
			if got := codeOf(err); got != tc.want {
				t.Fatalf("code %q, want %q (err %v, out %s)", got, tc.want, err, out)
			}
			evs := syscallEvents(t, w.events(t, tc.pid)[nEvents:], "net.fetch")
			if len(evs) != 1 {
				t.Fatalf("%d net.fetch audit events, want 1: every decision is audited", len(evs))
			}
			ev := evs[0]
			if _, kept := ev["args"]; kept {
				t.Fatalf("the audit event keeps the fetch's arguments whole (bodies, header values): %v", ev)
			}
			if tc.want == "" {
				var res map[string]any
				if err := json.Unmarshal(out, &res); err != nil {
					t.Fatal(err)
				}
				if res["body"] != tc.body || res["status"] != float64(200) {
					t.Fatalf("result %s, want status 200 and body %q", out, tc.body)
				}
				if tc.server.hits.Load() == before {
					t.Fatalf("the server saw no request")
				}
				net, _ := ev["net"].(map[string]any)
				if ev["decision"] != "allowed" || net == nil || net["status"] != float64(200) || net["method"] == nil || net["host"] == nil || net["path"] == nil || net["address"] == nil || net["response_bytes"] != float64(len(tc.body)) {
					t.Fatalf("the audit event of an allowed fetch names method, host, path, status, address and sizes: %v", ev)
				}
				if strings.Contains(fmt.Sprint(ev), tc.body) {
					t.Fatalf("the audit event holds the response body: %v", ev)
				}
				return
			}
			if ev["code"] != tc.want {
				t.Fatalf("audit event code %v, want %s: %v", ev["code"], tc.want, ev)
			}
			if tc.want != syscalls.CodeFetchTimeout && ev["decision"] != "denied" {
				t.Fatalf("a refusal by policy is a denied decision: %v", ev)
			}
			if tc.server != nil && tc.server.hits.Load() != before {
				t.Fatalf("the server saw %d requests for a refused fetch", tc.server.hits.Load()-before)
			}
		})
	}
}

// TestNetFetchValidatesAgainstTapes: "In validation, net.fetch is served by the tape
// like every route" and "candidates using net.fetch validate against tapes with no
// network at all": the process holds no net:fetch and its image grants no host; the
// tape answers.
func TestNetFetchValidatesAgainstTapes(t *testing.T) {
	w := newWorld(t)
	pid := w.spawn(t, engine.Direct)
	test := `[{"args":{"user":"ada"},"expected":{"name":"Ada","repos":3},"syscalls":[
	  {"name":"net.fetch","args":{"url":"https://api.example.com/users/ada","headers":{"Authorization":"Bearer {{secret:API_TOKEN}}"}},
	   "result":{"status":200,"headers":{"content-type":"application/json"},"body":"{\"name\":\"Ada\",\"repos\":3}","body_encoding":"text","url":"https://api.example.com/users/ada"}}]},
	 {"args":{"user":"bob"},"expected":{"name":"refused","repos":0},"syscalls":[
	  {"name":"net.fetch","ok":false,"error":"host_not_allowed"}]}]`
	obj := candidateJSON(t, "good_clock_now.json")
	obj = withField(t, obj, "name", `"user_repos"`)
	catching := `export async function run(args: { user: string }, libos: any) {
  let res: any;
  try {
    res = await libos.syscall("net.fetch", { url: "https://api.example.com/users/" + args.user, headers: { Authorization: "Bearer {{secret:API_TOKEN}}" } });
  } catch (e) {
    return { name: "refused", repos: 0 };
  }
  const data = JSON.parse(res.body);
  return { name: String(data.name), repos: Number(data.repos) };
}`
	obj = withField(t, obj, "source_code", jsonString(catching))
	obj = withField(t, obj, "input_schema", `{"type":"object","properties":{"user":{"type":"string","maxLength":64}},"required":["user"],"additionalProperties":false}`)
	obj = withField(t, obj, "output_schema", `{"type":"object","properties":{"name":{"type":"string","maxLength":256},"repos":{"type":"number"}},"required":["name","repos"],"additionalProperties":false}`)
	obj = withField(t, obj, "tests", test)
	rep := w.mustCall(t, pid, tools.ValidateName, idArg(w.propose(t, pid, obj)))
	if rep["ok"] != true {
		t.Fatalf("validation against the tape failed: %v", rep)
	}
}
