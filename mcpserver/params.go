package mcpserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The params of a tools/call request hold name, arguments and _meta, and nothing else.
// The SDK decodes them into a struct, which drops every other key, and a duplicated
// key keeps only its last value: the adapter, which refuses unknown and duplicate keys
// in a frame, would never see them. So the raw JSON-RPC messages are looked at before
// the SDK decodes them: a tools/call whose params are not a plain {name, arguments,
// _meta} object is passed on with its raw params in _meta under a key only this server
// knows, and the call handler gives the kernel the whole request as the frame. The
// adapter then refuses it (protocol_frame), and the refusal is in the audit log as
// protocol_rejected. Well-formed requests are passed on byte for byte.

// paramsKeys are the keys of tools/call params.
var paramsKeys = []string{"name", "arguments", "_meta"}

// newRawKey is the _meta key that carries raw params, with a random part so that a
// client cannot supply it.
func newRawKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "libos/raw-params-" + hex.EncodeToString(b[:])
}

// rewriteMessage returns msg (one JSON-RPC message or a batch) with the params of every
// tools/call that are not a plain params object moved under rawKey, and whether it
// changed anything.
func rewriteMessage(msg []byte, rawKey string) ([]byte, bool) {
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) == 0 {
		return msg, false
	}
	switch trimmed[0] {
	case '{':
		return rewriteRequest(msg, rawKey)
	case '[':
		var batch []json.RawMessage
		if json.Unmarshal(msg, &batch) != nil {
			return msg, false
		}
		changed := false
		for i, m := range batch {
			if nm, ok := rewriteRequest(m, rawKey); ok {
				batch[i], changed = nm, true
			}
		}
		if !changed {
			return msg, false
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return msg, false
		}
		return out, true
	}
	return msg, false
}

func rewriteRequest(msg []byte, rawKey string) ([]byte, bool) {
	method, params, ok := envelope(msg)
	if !ok || method != "tools/call" {
		return msg, false
	}
	keys, ok := objectKeys(params)
	if !ok || plainParams(keys) {
		// Not an object (the SDK refuses it), or exactly what the SDK decodes whole.
		return msg, false
	}
	var p struct {
		Name json.RawMessage `json:"name"`
		Meta json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	meta := map[string]json.RawMessage{}
	if json.Unmarshal(p.Meta, &meta) != nil || meta == nil {
		meta = map[string]json.RawMessage{}
	}
	raw, _ := json.Marshal(string(params))
	meta[rawKey] = raw
	var name string
	_ = json.Unmarshal(p.Name, &name)
	np, err := json.Marshal(struct {
		Name string                     `json:"name"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}{name, meta})
	if err != nil {
		return msg, false
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(msg, &env) != nil {
		return msg, false
	}
	env["params"] = np
	out, err := json.Marshal(env)
	if err != nil {
		return msg, false
	}
	return out, true
}

// plainParams says whether keys are distinct params keys.
func plainParams(keys []string) bool {
	seen := map[string]bool{}
	for _, k := range keys {
		known := false
		for _, p := range paramsKeys {
			known = known || k == p
		}
		if !known || seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// envelope reads the method and params of a JSON-RPC message as the SDK does: keys
// matched exactly (encoding/json's struct decoding would fold case), the last of a
// duplicated key winning.
func envelope(msg []byte) (method string, params json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", nil, false
		}
		switch t {
		case "method":
			method = ""
			_ = json.Unmarshal(v, &method)
		case "params":
			params = v
		}
	}
	return method, params, true
}

// objectKeys lists the keys of the JSON object b in order, duplicates included.
func objectKeys(b []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, ok := t.(string)
		if !ok {
			return nil, false
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
		keys = append(keys, k)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	return keys, true
}

// rawFrame is the frame of a call whose params the SDK could not carry whole: the
// JSON-RPC request around the params exactly as they arrived.
func (s *Server) rawFrame(req *mcp.CallToolRequest) ([]byte, bool) {
	if req.Params == nil {
		return nil, false
	}
	raw, ok := req.Params.Meta[s.rawKey].(string)
	if !ok {
		return nil, false
	}
	return []byte(`{"method":"tools/call","params":` + raw + `}`), true
}

// Transport is the stdio transport of the server: newline-delimited JSON-RPC read
// from in and written to out, with the tools/call params check in front of the SDK.
// Closing the connection does not close out.
func (s *Server) Transport(in io.Reader, out io.Writer) mcp.Transport {
	return &mcp.IOTransport{Reader: s.filter(in, mcp.DefaultMaxLineLength), Writer: nopCloser{out}}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// errTooLarge stops the filter's decoder at a message the SDK will refuse anyway.
var errTooLarge = errors.New("mcp: message larger than the transport's limit")

// recorder keeps every byte read from r that has not been passed on yet, up to limit.
type recorder struct {
	r     io.Reader
	limit int
	buf   []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	room := r.limit - len(r.buf)
	if room <= 0 {
		return 0, errTooLarge
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// filter passes the JSON values read from in to the returned reader, rewriting those
// that rewriteMessage rewrites and keeping every other byte (white space between
// messages included) as it was, so the SDK sees the stream it would have seen. From
// the first thing that is not JSON, or a message over limit, on, the input is passed
// through untouched: the SDK reports it.
func (s *Server) filter(in io.Reader, limit int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		rec := &recorder{r: in, limit: limit}
		dec := json.NewDecoder(rec)
		var base int64 // input offset of rec.buf[0]
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if _, werr := pw.Write(rec.buf); werr != nil {
					return
				}
				if errors.Is(err, io.EOF) {
					err = nil
				} else {
					_, err = io.Copy(pw, in)
				}
				pw.CloseWithError(err)
				return
			}
			end := int(dec.InputOffset() - base)
			start := end - len(raw)
			out := rec.buf[:end]
			if nm, ok := rewriteMessage(raw, s.rawKey); ok {
				out = append(append([]byte{}, rec.buf[:start]...), nm...)
			}
			if _, err := pw.Write(out); err != nil {
				return
			}
			rec.buf = append(rec.buf[:0], rec.buf[end:]...)
			base += int64(end)
		}
	}()
	return pr
}

// Handler is the streamable HTTP handler of the server, with the tools/call params
// check in front of the SDK. Bodies larger than maxBody are passed on untouched.
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, opts)
	const maxBody = mcp.DefaultMaxLineLength
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			rest := r.Body
			if err == nil && len(body) <= maxBody {
				if nb, ok := rewriteMessage(body, s.rawKey); ok {
					body = nb
					r.ContentLength = int64(len(nb))
					r.Header.Del("Content-Length")
				}
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), rest), rest}
		}
		h.ServeHTTP(w, r)
	})
}
