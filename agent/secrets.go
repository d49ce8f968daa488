package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/agentlibos/libos/liberr"
)

// A secret is a credential of a provider and the placeholder that stands for it in
// any text the provider path reports. A provider can echo what it was sent (an error
// body quoting the key, the SDK's error quoting the request URL with its password),
// and such a text reaches error messages, the provider_failed event and the terminal.
type secret struct {
	value, name string
}

// minSecretPrefix is the shortest prefix of a secret that redact removes at the end of
// a clipped text: a shorter one says next to nothing of the secret and would hit the
// ordinary words a message ends with.
const minSecretPrefix = 4

type secrets []secret

// secretsOf lists cfg's credentials, each in every spelling a text may carry it in:
// as given, as a URL writes it (percent-escaped) and as JSON or %q quotes it.
func secretsOf(cfg ProviderConfig) secrets {
	var s secrets
	add := func(v, name string) {
		if v == "" || slices.ContainsFunc(s, func(x secret) bool { return x.value == v }) {
			return
		}
		s = append(s, secret{value: v, name: name})
		if q, err := json.Marshal(v); err == nil && string(q[1:len(q)-1]) != v {
			s = append(s, secret{value: string(q[1 : len(q)-1]), name: name})
		}
	}
	add(cfg.APIKey, "api_key")
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p, "base_url_password")
			_, escaped, _ := strings.Cut(u.User.String(), ":")
			add(escaped, "base_url_password")
			// As written in the base URL, which may escape it otherwise.
			if _, rest, ok := strings.Cut(cfg.BaseURL, "://"); ok {
				if userinfo, _, ok := strings.Cut(rest, "@"); ok {
					_, written, _ := strings.Cut(userinfo, ":")
					add(written, "base_url_password")
				}
			}
		}
	}
	// The longest first, so that a secret holding another is replaced whole.
	slices.SortStableFunc(s, func(a, b secret) int { return cmp.Compare(len(b.value), len(a.value)) })
	return s
}

// redact replaces every secret in text by its placeholder. A text cut by liberr.Clip
// may end with a secret cut in half: that prefix, left just before liberr.ClipMark, is
// replaced too.
func (s secrets) redact(text string) string {
	for _, v := range s {
		text = strings.ReplaceAll(text, v.value, "{{secret:"+v.name+"}}")
	}
	body, clipped := strings.CutSuffix(text, liberr.ClipMark)
	if !clipped {
		return text
	}
	for _, v := range s {
		for n := len(v.value) - 1; n >= minSecretPrefix; n-- {
			if strings.HasSuffix(body, v.value[:n]) {
				body = body[:len(body)-n] + "{{secret:" + v.name + "}}"
				break
			}
		}
	}
	return body + liberr.ClipMark
}

// scrub returns err with the secrets redacted from every text it shows: its message,
// and its cause, which is kept as its redacted text only (the SDK's error value holds
// the request, and with it the credentials). Every error a provider returns passes
// through it.
func (s secrets) scrub(err error) error {
	if err == nil {
		return nil
	}
	e, ok := liberr.As(err)
	if !ok {
		e = errorf(CodeProviderBadResponse, err, "%s", liberr.Clip(err.Error(), 300))
	}
	out := *e
	out.Message = s.redact(e.Message)
	out.Details = nil
	for _, d := range e.Details {
		out.Details = append(out.Details, liberr.Detail{Path: d.Path, Message: s.redact(d.Message)})
	}
	switch f, isFailure := e.Err.(*ProviderFailure); {
	case isFailure:
		g := *f
		if f.Err != nil {
			g.Err = errors.New(s.redact(f.Err.Error()))
		}
		out.Err = &g
	case e.Err != nil:
		out.Err = errors.New(s.redact(e.Err.Error()))
	}
	return &out
}
