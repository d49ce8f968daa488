package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentlibos/libos/engine/internal/datadriven"
	"github.com/agentlibos/libos/liberr"
)

var testAdapterLimits = adapterLimits{maxDepth: 64, maxFrameBytes: 1 << 20}

func formatNormalized(n normalized, err error) string {
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return "untyped error: " + err.Error()
		}
		return fmt.Sprintf("error: %s: %s", e.Code, e.Error())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", n.name)
	if n.fromAction {
		b.WriteString("fallback: action\n")
	}
	if n.dropped {
		b.WriteString("dropped: action\n")
	}
	fmt.Fprintf(&b, "args: %s\n", n.args.Compact())
	fmt.Fprintf(&b, "arg-bytes: %d", n.argBytes)
	return b.String()
}

// TestAdapter runs the datadriven adapter cases in testdata/adapter: each quotes the
// seed or DESIGN.md rule it checks.
func TestAdapter(t *testing.T) {
	files, err := filepath.Glob("testdata/adapter/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no adapter cases: %v", err)
	}
	total := 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			datadriven.Walk(t, file, func(t *testing.T, c *datadriven.Case) string {
				if c.Cmd != "frame" {
					t.Fatalf("unknown command %q", c.Cmd)
				}
				frame := c.Input
				if _, ok := c.Args["quoted"]; ok {
					frame, err = strconv.Unquote(c.Input)
					if err != nil {
						t.Fatalf("bad quoted input: %v", err)
					}
				}
				n, err := normalizeFrame([]byte(frame), testAdapterLimits)
				checkNormalized(t, n, err)
				return formatNormalized(n, err)
			})
		})
		n, err := datadriven.Cases(file)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total < 60 {
		t.Errorf("only %d datadriven adapter cases; the adapter's rules need at least 60", total)
	}
}

// checkNormalized asserts what every successful normalisation guarantees, whatever the
// input: a non-empty trimmed name, an object without a top-level action, and a typed
// protocol error otherwise.
func checkNormalized(t *testing.T, n normalized, err error) {
	t.Helper()
	if err != nil {
		if liberr.CodeOf(err) != CodeProtocolFrame && liberr.CodeOf(err) != CodeLimitExceeded {
			t.Fatalf("adapter failure with code %q, want protocol_frame or limit_exceeded: %v", liberr.CodeOf(err), err)
		}
		if !strings.HasPrefix(err.Error(), "engine: protocol frame: ") {
			t.Fatalf("adapter error message %q does not say it is a protocol frame failure", err)
		}
		return
	}
	if n.name == "" || n.name != ToolName(n.name) || len(n.name) > maxNameBytes {
		t.Fatalf("dispatched name %q is empty, untrimmed or too long", n.name)
	}
	if n.args.Kind != 5 /* jsonx.Object */ {
		t.Fatalf("dispatched arguments are a %s, not an object", n.args.Kind)
	}
	if _, ok := n.args.Get(actionKey); ok {
		t.Fatalf("dispatched arguments still carry a top-level action: %s", n.args.Compact())
	}
}
