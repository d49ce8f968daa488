package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/agentlibos/libos/wasm"
)

// version is the libOS version, set at link time for releases.
var version = "0.0.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("libos", version)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "smoke" {
		if err := smoke(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "libos smoke:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "libos: no commands yet; see README.md")
	os.Exit(2)
}

const smokeProgram = `async function run(args, libos) {
  console.log("hello from QuickJS in wasm");
  let sum = 0;
  for (const n of args.numbers) sum += n;
  return {sum, at: new Date().toISOString()};
}`

// smoke runs one small JavaScript program in the sandbox and prints its result:
// libos smoke [program.js [args.json]].
func smoke(argv []string) error {
	program, args := smokeProgram, `{"numbers":[1,2,3,4,5,6,7,8,9,10]}`
	if len(argv) > 2 {
		return fmt.Errorf("usage: libos smoke [program.js [args-json]]")
	}
	if len(argv) > 0 {
		b, err := os.ReadFile(argv[0])
		if err != nil {
			return err
		}
		program, args = string(b), "{}"
	}
	if len(argv) > 1 {
		args = argv[1]
	}
	ctx := context.Background()
	t0 := time.Now()
	e, err := wasm.NewEngine(ctx, wasm.Config{})
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	compiled := time.Since(t0)
	res, err := e.Run(ctx, program, json.RawMessage(args), nil, wasm.Options{})
	if res != nil {
		for _, l := range res.Logs {
			fmt.Fprintf(os.Stderr, "[%s] %s\n", l.Level, l.Message)
		}
	}
	if err != nil {
		return err
	}
	fmt.Println(string(res.Value))
	fmt.Fprintf(os.Stderr, "compiled in %v, ran in %v, peak memory %d KiB\n",
		compiled.Round(time.Millisecond), res.Stats.Duration.Round(time.Microsecond), res.Stats.PeakMemory>>10)
	return nil
}
