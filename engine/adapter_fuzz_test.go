package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// FuzzAdapter: whatever the frame, the adapter does not panic, fails only with a typed
// protocol-frame (or frame-size) error, and never dispatches anything malformed: a
// dispatched call has a trimmed non-empty name and an exact JSON object without a
// top-level action, whose text re-decodes to the same value and is valid for
// encoding/json too. The seed corpus is committed in testdata/fuzz/FuzzAdapter; every
// datadriven adapter case is added as a seed as well.
//
//	go test ./engine -run '^$' -fuzz FuzzAdapter -fuzztime 60s
func FuzzAdapter(f *testing.F) {
	files, _ := filepath.Glob("testdata/adapter/*.txt")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "frame ") && i+2 < len(lines) {
				in := lines[i+2]
				if strings.Contains(l, " quoted") {
					if u, err := strconv.Unquote(in); err == nil {
						in = u
					}
				}
				f.Add([]byte(in))
			}
		}
	}
	lim := adapterLimits{maxDepth: 16, maxFrameBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, frame []byte) {
		n, err := normalizeFrame(frame, lim)
		checkNormalized(t, n, err)
		if err != nil {
			return
		}
		if !utf8.ValidString(n.name) {
			t.Fatalf("dispatched name is not UTF-8: %q", n.name)
		}
		text := n.args.Compact()
		if !json.Valid(text) || !utf8.Valid(text) {
			t.Fatalf("dispatched arguments are not valid JSON: %q", text)
		}
		again, err := jsonexact.Decode(text, lim.maxDepth)
		if err != nil {
			t.Fatalf("dispatched arguments do not re-decode: %v: %q", err, text)
		}
		if !bytes.Equal(again.Compact(), text) {
			t.Fatalf("dispatched arguments do not round-trip: %q vs %q", again.Compact(), text)
		}
		if depth(&n.args) > lim.maxDepth {
			t.Fatalf("dispatched arguments nest deeper than %d", lim.maxDepth)
		}
	})
}
