package render

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentlibos/libos/liberr"
)

// "The projection also renders tool definitions for providers: MCP Tool objects,
// OpenAI function definitions (strict-mode subset), Anthropic tool definitions": every
// provider in the one list renders, and a name outside it is invalid_config.
func TestProvidersAreTheRenderings(t *testing.T) {
	def := Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
	for _, p := range Providers() {
		got, err := ParseProvider(string(p))
		if err != nil || got != p {
			t.Fatalf("ParseProvider(%q) = %q, %v", p, got, err)
		}
		out, err := Tools([]Tool{def}, p)
		if err != nil || !json.Valid(out) {
			t.Fatalf("%s: %s, %v", p, out, err)
		}
	}
	for _, bad := range []string{"", "MCP", "gemini", "openai "} {
		if _, err := ParseProvider(bad); !errors.Is(err, &liberr.Error{Code: "invalid_config"}) {
			t.Errorf("ParseProvider(%q): %v, want invalid_config", bad, err)
		}
		if _, err := Tools([]Tool{def}, Provider(bad)); !errors.Is(err, &liberr.Error{Code: "invalid_config"}) {
			t.Errorf("Tools(%q): %v, want invalid_config", bad, err)
		}
	}
}
