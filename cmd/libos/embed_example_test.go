package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/store"
	"github.com/agentlibos/libos/tools"
	"github.com/agentlibos/libos/wasm"
)

// Example_embedding is the README's "embedding API in ten lines", kept compiling and
// running.
func Example_embedding() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "libos-example-")
	defer os.RemoveAll(dir)

	st, _ := store.Open(dir, store.Options{})
	sb, _ := wasm.NewEngine(ctx, wasm.Config{})
	jit, _ := tools.NewJIT(tools.Config{Store: st, Sandbox: sb})
	k, _ := engine.Open(ctx, st, engine.Config{Builtins: append([]engine.Tool{tools.Echo()}, jit.Tools()...)})
	_ = jit.Attach(ctx, k)
	pid, _ := k.Spawn(ctx, engine.ProcessConfig{Capabilities: []string{"clock:now"},
		Tools: []string{"echo", "propose_jit_tool", "validate_jit_tool", "register_jit_tool"}})
	res, err := k.HandleFrame(ctx, pid, []byte(`{"name":"echo","arguments":{"n":9007199254740993}}`))
	fmt.Println(res.Text, err)

	k.Close()
	st.Close()
	sb.Close(ctx)
	// Output: {"n":9007199254740993} <nil>
}
