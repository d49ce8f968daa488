package libos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/engine/render"
	"github.com/agentlibos/libos/mcpserver"
)

// Embed the libOS, spawn a process of the default image and hand it a model's tool
// call. HandleFrame takes the call as any provider frames it (OpenAI, Anthropic, MCP);
// numbers keep their exact text. RenderTools gives the process's tools to the model.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "libos-example-")
	defer os.RemoveAll(dir)

	sys, err := libos.Open(ctx, dir, libos.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Close()
	img, _ := libos.DefaultImage() // echo, the JIT tool lifecycle, clock:now, kv, tools:call
	pid, _ := sys.SpawnImage(ctx, img)
	res, err := sys.HandleFrame(ctx, pid, []byte(`{"name":"echo","arguments":{"n":9007199254740993}}`))
	fmt.Println(res.Text, err)
	defs, _ := sys.RenderTools(pid, render.OpenAI) // or render.MCP, render.Anthropic
	fmt.Println(json.Valid(defs))
	// Output:
	// {"n":9007199254740993} <nil>
	// true
}

// A model writes a tool: propose it with its tests, validate it (static checks, then
// every test in the sandbox), register it, and call it like any other tool. Here the
// host drives the calls through the host tool API; a model does the same with frames.
func Example_jitTool() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "libos-example-")
	defer os.RemoveAll(dir)
	sys, err := libos.Open(ctx, dir, libos.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Close()
	img, _ := libos.DefaultImage()
	pid, _ := sys.SpawnImage(ctx, img)
	call := func(name, args string) map[string]any {
		res, err := sys.Runtime().Tools.Call(ctx, pid, name, json.RawMessage(args))
		if err != nil {
			log.Fatal(err)
		}
		var out map[string]any
		_ = json.Unmarshal(res.Structured, &out)
		return out
	}

	proposed := call("propose_jit_tool", `{
		"name": "add",
		"description": "Add two integers.",
		"source_code": "export function run(args: { a: number, b: number }) { return { sum: args.a + args.b }; }",
		"input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
			"required": ["a", "b"], "additionalProperties": false},
		"output_schema": {"type": "object", "properties": {"sum": {"type": "integer"}},
			"required": ["sum"], "additionalProperties": false},
		"tests": [{"args": {"a": 2, "b": 3}, "expected": {"sum": 5}, "syscalls": []}]
	}`)
	id, _ := json.Marshal(map[string]any{"candidate_id": proposed["candidate_id"]})
	validated := call("validate_jit_tool", string(id))
	fmt.Println("validated:", validated["ok"])
	registered := call("register_jit_tool", string(id))
	fmt.Println("registered:", registered["name"], registered["scope"])
	res, err := sys.HandleFrame(ctx, pid, []byte(`{"name":"add","arguments":"{\"a\":40,\"b\":2}"}`))
	fmt.Println(res.Text, err)
	// Output:
	// validated: true
	// registered: add ephemeral_process
	// {"sum":42} <nil>
}

// Serve a process over MCP. On stdio, as 'libos serve' does, the transport is
// &mcp.StdioTransport{}; any transport of the MCP Go SDK works, here the in-memory pair,
// with the SDK's client on the other end.
func ExampleSystem_ServeMCP() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "libos-example-")
	defer os.RemoveAll(dir)
	sys, err := libos.Open(ctx, dir, libos.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Close()
	img, _ := libos.DefaultImage()
	pid, _ := sys.SpawnImage(ctx, img)

	serverT, clientT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- sys.ServeMCP(ctx, pid, serverT, mcpserver.Options{}) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"hello": "mcp"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	session.Close()
	fmt.Println(<-served)
	// Output:
	// {"hello":"mcp"}
	// <nil>
}

// Check a candidate file as a CI step does ('libos validate'), with no store: the
// proposal checks, the static checks of its TypeScript, the schema lint and every test
// in the sandbox on its syscall tape.
func ExampleValidator() {
	ctx := context.Background()
	v, err := libos.NewValidator(ctx, libos.ValidatorOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	file, err := os.ReadFile("testdata/candidates/good_sum_exact.json")
	if err != nil {
		log.Fatal(err)
	}
	rep, err := v.Validate(ctx, file)
	if err != nil {
		log.Fatal(err) // not a candidate at all
	}
	fmt.Println(rep.OK, len(rep.Tests), len(rep.Errors))
	// Output: true 3 0
}
