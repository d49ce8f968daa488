package tools_test

import (
	"testing"

	"github.com/agentlibos/libos/tools"
)

// TestParamHeaderAccepted: an input schema whose x-mcp-header annotations follow
// SEP-2243 (a token naming the header Mcp-Param-<value>, on a string, integer or
// boolean property, unique without regard to case, at any depth) is a valid
// proposal; TestProposeRefusals has the refused ones.
func TestParamHeaderAccepted(t *testing.T) {
	good := candidateJSON(t, "good_clock_now.json")
	for _, schema := range []string{
		`{"type":"object","properties":{"timezone":{"type":"string","maxLength":64,"x-mcp-header":"Time-Zone"}},"required":["timezone"],"additionalProperties":false}`,
		`{"type":"object","properties":{"timezone":{"type":"string","x-mcp-header":"TZ"},"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N!#$%&'*+-.^_|~1"},"b":{"type":"boolean","x-mcp-header":"B"}}}},"required":["timezone"]}`,
	} {
		c, err := tools.ParseCandidate([]byte(withField(t, good, "input_schema", schema)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tools.CheckProposal(c, tools.Limits{}); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
}
