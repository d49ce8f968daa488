package engine_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// Protocol-diagnostics seed: malformed JSON and non-object arguments "fail in protocol
// normalization before Echo execution. An Echo result cannot diagnose those failures
// because no Echo result exists; use provider/repair/audit evidence." The
// protocol_rejected event keeps the frame itself (bounded, with size and sha256) for the
// operator; the error the model gets never carries it.
func TestRejectedFrameIsKeptAsEvidence(t *testing.T) {
	w := newWorld(t, engine.Config{}, syscalls.RouterConfig{})
	def, _ := tools.DefaultImage()
	pid := w.spawnImage(t, def)
	const marker = "SENTINEL-7f3a"
	big := `{"name":"echo","arguments":"[\"` + marker + strings.Repeat("é", 3000) + `\"]"}`
	for _, tc := range []struct {
		frame     string
		truncated bool
	}{
		{`{"name":"echo","arguments":"{\"x\": [1, 2,"}`, false},
		{`{"name":"echo","arguments":"[1,\"` + marker + `\"]"}`, false},
		{big, true},
		{"{\"name\":\"echo\",\"arguments\":\"\xff" + marker + "\"}", false},
	} {
		_, err := w.k.HandleFrame(context.Background(), pid, []byte(tc.frame))
		if codeOf(err) != "protocol_frame" {
			t.Fatalf("%.60s: %v", tc.frame, err)
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), `"x": [1`) {
			t.Fatalf("the frame reached the model: %v", err)
		}
		ev := lastOf(t, w.events(t, pid), engine.EventProtocolRejected)
		var d struct {
			Frame       *string `json:"frame"`
			FrameBase64 string  `json:"frame_base64"`
			Bytes       int     `json:"frame_bytes"`
			SHA         string  `json:"frame_sha256"`
			Truncated   bool    `json:"frame_truncated"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		kept := ""
		if d.Frame != nil {
			kept = *d.Frame
		} else {
			b, _ := base64.StdEncoding.DecodeString(d.FrameBase64)
			kept = string(b)
		}
		want := tc.frame
		if tc.truncated {
			if len(kept) > engine.MaxRejectedFrameBytes || len(kept) < engine.MaxRejectedFrameBytes-3 || !strings.HasPrefix(want, kept) {
				t.Fatalf("kept %d bytes of %d", len(kept), len(want))
			}
		} else if kept != want {
			t.Fatalf("kept %q, want %q", kept, want)
		}
		if d.Bytes != len(tc.frame) || len(d.SHA) != 64 || d.Truncated != tc.truncated {
			t.Fatalf("event %s", ev.Data)
		}
	}
}
