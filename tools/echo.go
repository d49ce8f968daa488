package tools

import (
	"context"
	"encoding/json"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/internal/jsonexact"
)

// EchoName is the name of the echo tool.
const EchoName = "echo"

// Echo returns the built-in echo tool: a transport diagnostic that returns the object
// it accepted. Its input is any top-level JSON object (extra fields permitted, no
// per-field validation); its output is that object after the adapter's normalisation,
// so without the reserved top-level action. It is read-only and needs no capability,
// but it is an ordinary tool to the kernel: its calls have tool_called and tool_result
// events and a persisted ToolResult, and the argument and result limits apply.
func Echo() engine.Tool {
	return engine.Tool{
		Name: EchoName,
		Description: "Return the JSON object you pass, to check that tool-call arguments and results travel intact " +
			"(types, nesting, numbers). Use a tiny, non-sensitive sentinel object; a top-level \"action\" key is " +
			"reserved by the protocol and is removed before echo runs.",
		InputSchema:  json.RawMessage(`{"type":"object","additionalProperties":true}`),
		OutputSchema: json.RawMessage(`{"type":"object","additionalProperties":true}`),
		Annotations:  engine.Annotations{Title: "Echo", ReadOnly: true, Idempotent: true},
		Kind:         engine.KindBuiltin,
		Handler:      echo,
	}
}

// echo returns exactly the arguments the pipeline handed it: the exact JSON the
// adapter accepted, numbers and strings as written. It hands them back as the value
// the adapter decoded (Call.Return), so the result is not parsed again.
func echo(_ context.Context, call *engine.Call) (json.RawMessage, error) {
	v, err := argsValue(call)
	if err != nil {
		return call.Args, nil // the pipeline refuses it, as any result that is not exact
	}
	d, err := jsonexact.Encode(v, maxEchoDepth)
	if err != nil {
		return call.Args, nil
	}
	return call.Return(d), nil
}

// maxEchoDepth bounds only the encoding of echo's result; the kernel applies its own
// depth limit to the arguments before and to the result after.
const maxEchoDepth = 10_000
