package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentlibos/libos/internal/jsonexact"
)

// exactRecorder is a Syscaller that takes the host's decoding (ExactSyscaller) and
// notes which of its two methods each syscall reached.
type exactRecorder struct {
	viaText, viaExact int
	value             jsonexact.Value
}

func (r *exactRecorder) Syscall(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	r.viaText++
	return json.RawMessage(`null`), nil
}

func (r *exactRecorder) SyscallExact(ctx context.Context, name string, args json.RawMessage, value jsonexact.Value) (json.RawMessage, error) {
	r.viaExact++
	r.value = value
	return json.RawMessage(`null`), nil
}

// "Parse a call's arguments once and hand the parsed value down": the host parses a
// guest's syscall arguments once, exactly, and an ExactSyscaller reads that decoding;
// text that is not JSON still gets syscall_args_invalid ("only JSON crosses the guest
// boundary") and never reaches the Syscaller; JSON that is not exact JSON reaches it
// as text, for its own exact check to refuse.
func TestSyscallArgsParsedOnceByTheHost(t *testing.T) {
	e := newHostTestEngine(t, Config{})
	ctx := context.Background()
	in, err := e.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close(ctx)
	deep := strings.Repeat("[", jsonexact.DefaultMaxDepth+1) + strings.Repeat("]", jsonexact.DefaultMaxDepth+1)
	for _, c := range []struct {
		what, args string
		want       string // "exact", "text" or the code of the host's own refusal
	}{
		{"exact JSON", `{"key":"k","value":[1,2.5,"x"]}`, "exact"},
		{"not JSON", `{"key":`, CodeSyscallArgsInvalid},
		{"trailing data", `{} {}`, CodeSyscallArgsInvalid},
		{"a repeated key", `{"key":"a","key":"b"}`, "text"},
		{"a lone surrogate", `{"key":"\ud800"}`, "text"},
		{"invalid UTF-8", "{\"key\":\"\xff\"}", "text"},
		{"too deep", `{"a":` + deep + `}`, "text"},
	} {
		rec := &exactRecorder{}
		c2 := &call{ctx: ctx, parent: ctx, sys: rec, lim: e.resolve(Limits{}), deadline: time.Duration(1 << 62)}
		cctx := context.WithValue(ctx, callKey{}, c2)
		name, args := []byte("kv.put"), []byte(c.args)
		np, _ := in.write(cctx, name)
		ap, _ := in.write(cctx, args)
		before := jsonexact.Decodes()
		stack := []uint64{uint64(np), uint64(len(name)), uint64(ap), uint64(len(args))}
		hostSyscall(cctx, in.mod, stack)
		parses := jsonexact.Decodes() - before
		n := int32(stack[0])
		if n <= 0 {
			t.Fatalf("%s: the syscall was interrupted (%d)", c.what, n)
		}
		var resp struct {
			OK    bool `json:"ok"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(c2.pending, &resp); err != nil {
			t.Fatalf("%s: response %q: %v", c.what, c2.pending, err)
		}
		switch c.want {
		case "exact":
			if rec.viaExact != 1 || rec.viaText != 0 || !resp.OK {
				t.Fatalf("%s: SyscallExact %d, Syscall %d, response %s", c.what, rec.viaExact, rec.viaText, c2.pending)
			}
			if got := string(rec.value.Compact()); got != c.args {
				t.Fatalf("%s: handed down %s, sent %s", c.what, got, c.args)
			}
			if parses != 1 {
				t.Fatalf("%s: the host parsed the arguments %d times, want once", c.what, parses)
			}
		case "text":
			if rec.viaText != 1 || rec.viaExact != 0 || !resp.OK {
				t.Fatalf("%s: Syscall %d, SyscallExact %d, response %s", c.what, rec.viaText, rec.viaExact, c2.pending)
			}
		default:
			if rec.viaText+rec.viaExact != 0 || resp.OK || resp.Error.Code != c.want {
				t.Fatalf("%s: reached the Syscaller %d times, response %s; want %s", c.what, rec.viaText+rec.viaExact, c2.pending, c.want)
			}
		}
	}
}

// RunDoc takes arguments the kernel has decoded (a jsonexact.Doc, exact by
// construction): they are not checked as JSON again, and they get the answers Run
// gives the same text. Protocol-diagnostics Skill: "Numbers keep their exact spelling
// (2^53+1 stays exact)": a number a double cannot hold is refused, never rounded,
// with its JSON Pointer; arguments that are not an object are refused as such.
func TestRunDocAnswersAsRun(t *testing.T) {
	e := hostTestEngine(t)
	const prog = `function run(a) { return a; }`
	doc := func(s string) jsonexact.Doc {
		d, err := jsonexact.DecodeDoc([]byte(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, args := range []string{`{"ok":1,"n":{"deep":[0.5,9007199254740993]}}`, `{"x~":1e400}`, `[1]`, `"s"`} {
		_, runErr := e.Run(hostCtx(t), prog, json.RawMessage(args), nil, Options{})
		d := doc(args)
		before := jsonexact.Decodes()
		_, docErr := e.RunDoc(hostCtx(t), prog, d, nil, Options{})
		if n := jsonexact.Decodes() - before; n != 0 {
			t.Errorf("%s: RunDoc parsed %d documents before refusing", args, n)
		}
		var rf, df *Fault
		if !errors.As(runErr, &rf) || !errors.As(docErr, &df) || rf.Code != df.Code || rf.Path != df.Path || rf.Message != df.Message {
			t.Fatalf("%s: Run %v, RunDoc %v: want the same refusal", args, runErr, docErr)
		}
	}
	for _, args := range []string{`{"a":9007199254740992,"b":0.1,"c":1e300,"s":"\u00e9"}`, `{}`} {
		run := mustRun(t, e, prog, args, nil, Options{})
		res, err := e.RunDoc(hostCtx(t), prog, doc(args), nil, Options{})
		if err != nil || string(res.Value) != string(run.Value) {
			t.Fatalf("%s: RunDoc %v %s, Run %s", args, err, res.Value, run.Value)
		}
	}
	res, err := e.RunDoc(hostCtx(t), prog, jsonexact.Doc{}, nil, Options{})
	if err != nil || string(res.Value) != `{}` {
		t.Fatalf("the zero Doc: %v %s, want {}", err, res.Value)
	}
}
