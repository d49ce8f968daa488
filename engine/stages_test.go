package engine

import (
	"slices"
	"testing"
)

// DESIGN, "The pipeline of one tool call": "adapter → projection/lookup → argument
// size limit → input-schema validation (rejects before execution) → visibility (and
// the Skill gate) → budget → tool_called event → handler → …". The stages before
// tool_called run in that order, with an operator-class tool's approval after the
// gates and before the budget (open charges the budget with tool_called).
func TestAdmissionStagesFollowDesign(t *testing.T) {
	var got []string
	for _, s := range admission {
		got = append(got, s.name)
	}
	want := []string{"lookup", "argument_size", "input_schema", "gate", "approval"}
	if !slices.Equal(got, want) {
		t.Fatalf("admission stages %v, want %v", got, want)
	}
}
