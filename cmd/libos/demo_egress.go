package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/randid"
	"github.com/agentlibos/libos/syscalls"
)

// summaryCandidate fetches a JSON list of repositories with a secret header and
// returns a summary. Its test runs on a tape: validation touches no network.
const summaryCandidate = `{
  "name": "repo_summary",
  "description": "Fetch a user's repositories from the API and summarise them.",
  "source_code": "export async function run(args: { url: string }, libos: any) {\n  const res = await libos.syscall(\"net.fetch\", { url: args.url, headers: { Authorization: \"Bearer {{secret:DEMO_TOKEN}}\" } });\n  const repos = JSON.parse(res.body).repos;\n  let stars = 0, top = \"\", best = -1;\n  for (const r of repos) { stars += r.stars; if (r.stars > best) { best = r.stars; top = r.name; } }\n  return { status: res.status, repos: repos.length, stars: stars, top: top };\n}\n",
  "input_schema": {"type":"object","properties":{"url":{"type":"string","maxLength":256}},"required":["url"],"additionalProperties":false},
  "output_schema": {"type":"object","properties":{"status":{"type":"integer","minimum":100,"maximum":999},"repos":{"type":"integer","minimum":0,"maximum":1000},"stars":{"type":"integer","minimum":0,"maximum":1000000},"top":{"type":"string","maxLength":64}},"required":["status","repos","stars","top"],"additionalProperties":false},
  "tests": [{
    "args": {"url":"https://api.example.com/repos"},
    "expected": {"status":200,"repos":2,"stars":7,"top":"x"},
    "syscalls": [{"name":"net.fetch","args":{"url":"https://api.example.com/repos","headers":{"Authorization":"Bearer {{secret:DEMO_TOKEN}}"}},
      "result":{"status":200,"headers":{},"body":"{\"repos\":[{\"name\":\"x\",\"stars\":4},{\"name\":\"y\",\"stars\":3}]}","body_encoding":"text","url":"https://api.example.com/repos"}}]
  }]
}`

// egress shows net.fetch: a JIT tool authored through the lifecycle fetches JSON from
// an allow-listed loopback server with a secret header; the same tool is refused when
// the image drops the host; the audit log shows each decision, and the secret's bytes
// are nowhere in it.
func (d *demo) egress() error {
	d.title("Governed egress: a JIT tool fetches JSON with a secret header, from an allow-listed host only")
	token := randid.New("demo-")
	// The secret lives in the host's environment; the image names only the variable.
	if err := os.Setenv("LIBOS_DEMO_TOKEN", token); err != nil {
		return err
	}
	defer os.Unsetenv("LIBOS_DEMO_TOKEN")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var sawToken bool
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorised", http.StatusUnauthorized)
			return
		}
		sawToken = true
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"repos":[{"name":"libos","stars":42},{"name":"quickjs-wasm","stars":17},{"name":"notes","stars":1}]}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	host := ln.Addr().String()
	url := "http://" + host + "/repos"

	img, err := loadImage("", engine.Direct)
	if err != nil {
		return err
	}
	img.Capabilities = append(img.Capabilities, string(syscalls.CapNetFetch))
	img.PolicySpec = syscalls.PolicySpec{
		Net:     &syscalls.NetSpec{Allow: []string{host}, AllowAddresses: []string{"127.0.0.1"}},
		Secrets: map[string]syscalls.SecretSpec{"DEMO_TOKEN": {FromEnv: "LIBOS_DEMO_TOKEN", Hosts: []string{host}}},
	}
	pid, err := d.sys.k.SpawnImage(d.ctx, img)
	if err != nil {
		return err
	}
	pol, _ := syscalls.CompilePolicy(img.Policy())
	d.say("pid %s; its image says ('libos images'):", pid)
	for _, l := range pol.Explain() {
		d.say("  %s", l)
	}
	if err := d.author(pid, summaryCandidate, "repo_summary", true); err != nil {
		return err
	}
	res, err := expectOK(d.call(pid, `{"name":"repo_summary","arguments":{"url":"`+url+`"}}`))
	if err != nil {
		return err
	}
	if !strings.Contains(res.Text, `"stars":60`) || !sawToken {
		return fmt.Errorf("the summary is %s (the server saw the token: %v)", res.Text, sawToken)
	}
	d.say("the server received the token; the guest only ever wrote {{secret:DEMO_TOKEN}}")

	d.say("the same tool in a process whose image drops the host (it allows only api.example.com):")
	dropped, err := loadImage("", engine.Direct)
	if err != nil {
		return err
	}
	dropped.Capabilities = append(dropped.Capabilities, string(syscalls.CapNetFetch))
	dropped.PolicySpec = syscalls.PolicySpec{
		Net:     &syscalls.NetSpec{Allow: []string{"api.example.com"}},
		Secrets: map[string]syscalls.SecretSpec{"DEMO_TOKEN": {FromEnv: "LIBOS_DEMO_TOKEN", Hosts: []string{"api.example.com"}}},
	}
	dpid, err := d.sys.k.SpawnImage(d.ctx, dropped)
	if err != nil {
		return err
	}
	if err := d.author(dpid, summaryCandidate, "repo_summary", false); err != nil {
		return err
	}
	if err := expectCode(syscalls.CodeHostNotAllowed, second(d.call(dpid, `{"name":"repo_summary","arguments":{"url":"`+url+`"}}`))); err != nil {
		return err
	}

	d.say("the audit log, each net.fetch decision (never bodies or secret values):")
	for _, p := range []string{pid, dpid} {
		evs, err := d.sys.Events(p, 0, 1000)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if bytes.Contains(ev.Data, []byte(token)) {
				return fmt.Errorf("event %d of %s holds the secret value", ev.Seq, p)
			}
			var a struct {
				Route, Decision, Stage, Code string
				Net                          *struct {
					Method, Host, Path, Address, Secrets string
					Status                               int
					ResponseBytes                        int64 `json:"response_bytes"`
				}
			}
			if ev.Type != syscalls.EventSyscall || json.Unmarshal(ev.Data, &a) != nil || a.Route != "net.fetch" {
				continue
			}
			line := fmt.Sprintf("%s seq %d: %s at %s", p, ev.Seq, a.Decision, a.Stage)
			if a.Code != "" {
				line += " (" + a.Code + ")"
			}
			if n := a.Net; n != nil {
				line += fmt.Sprintf(": %s %s%s", n.Method, n.Host, n.Path)
				if n.Status != 0 {
					line += fmt.Sprintf(" → %d, %d bytes, via %s, secrets sent: %s", n.Status, n.ResponseBytes, n.Address, n.Secrets)
				}
			}
			d.say("  %s", line)
		}
	}
	d.say("the token's bytes appear in no event of either process")
	return nil
}
