package cluster

import (
	"net/url"
	"strings"
)

// redacted stands for the user information of a URL (a user and a password, or a
// token) wherever the URL is shown.
const redacted = "redacted"

// userinfo returns where the user information of the URL u lies in it (start, end),
// or -1, -1. It reads u as written, without parsing it: a URL that does not parse is
// the one whose error quotes it.
func userinfo(u string) (int, int) {
	start := 0
	if i := strings.Index(u, "://"); i >= 0 {
		start = i + 3
	}
	end := len(u)
	if i := strings.IndexAny(u[start:], "/?#"); i >= 0 {
		end = start + i
	}
	at := strings.LastIndex(u[start:end], "@")
	if at < 0 {
		return -1, -1
	}
	return start, start + at
}

// RedactURL returns urls (one URL or several, comma-separated) with the user
// information of each replaced by "redacted": what an error or a log line may show
// of a URL that may carry credentials.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if s, e := userinfo(p); s >= 0 {
			parts[i] = p[:s] + redacted + p[e:]
		}
	}
	return strings.Join(parts, ",")
}

// redactText takes every credential of urls (each URL's user information, raw and
// decoded, and its password or token alone) out of text.
func redactText(text string, urls ...string) string {
	for _, list := range urls {
		for _, p := range strings.Split(list, ",") {
			s, e := userinfo(p)
			if s < 0 || e == s {
				continue
			}
			forms := []string{p[s:e]}
			if dec, err := url.PathUnescape(p[s:e]); err == nil {
				forms = append(forms, dec)
			}
			var secrets []string
			for _, f := range forms {
				user, pass, ok := strings.Cut(f, ":")
				if !ok {
					pass = user // a token
				}
				secrets = append(secrets, f, pass)
			}
			for _, sec := range secrets {
				if sec != "" {
					text = strings.ReplaceAll(text, sec, redacted)
				}
			}
		}
	}
	return text
}

// redactCause is cause when its text carries no credential of urls, else an error
// of its text with them taken out.
func redactCause(cause error, urls ...string) error {
	if cause == nil {
		return nil
	}
	if t := redactText(cause.Error(), urls...); t != cause.Error() {
		return redactedError(t)
	}
	return cause
}

type redactedError string

func (e redactedError) Error() string { return string(e) }
