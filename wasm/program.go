package wasm

import (
	"container/list"
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// Programs are compiled once. A call does not hand its JavaScript to libos_run: the
// Engine first has the guest compile it (libos_compile) into QuickJS bytecode, keeps that
// bytecode in memory, and every call of the same program (each test of a candidate, each
// call of a registered tool) runs from it (libos_run with runBytecode), so that QuickJS
// parses a program once per Engine instead of once per call.
//
// The bytecode is trusted input to the guest (JS_ReadObject does not check what it reads),
// so it only ever comes from this cache: bytes the guest wrote from a program's text in a
// fresh state, held in host memory, never written to disk and never taken from a caller.
//
// A call's result does not depend on whether the bytecode was cached: the compile runs
// on the prepared state with the call's memory and stack limits, which are part of the
// key, and the fuel it spent is kept with the bytecode and counted to every call that
// runs it, as if each had compiled it; the run itself always starts from the bytecode.

// programKey names the bytecode of one program, compiled by one guest under the limits
// that decide whether a compile succeeds.
type programKey struct {
	guest  string   // the guest's sha256
	source [32]byte // sha256 of the program text
	memory int64
	stack  int
}

// program is one compile in the cache: in flight until ready is closed, then ok with its
// bytecode, or failed (and gone from the cache).
type program struct {
	ready    chan struct{}
	ok       bool
	bytecode []byte
	fuel     int64 // the guest work of the compile
	elem     *list.Element
}

// Bounds of the cache: the bytecode of a tool is a few kilobytes.
const (
	programCacheBytes = 32 << 20
	programMaxBytes   = programCacheBytes / 16
)

// programCache holds compiled programs, least recently used first out.
type programCache struct {
	mu    sync.Mutex
	m     map[programKey]*program
	lru   list.List // of programKey, most recent at the front
	bytes int
	// compiles counts the compiles the cache handed out, for tests.
	compiles atomic.Int64
}

func (e *Engine) programKey(source string, lim Limits) programKey {
	return programKey{guest: e.guestSHA, source: sha256.Sum256([]byte(source)), memory: lim.Memory, stack: lim.Stack}
}

// lookup returns the program for k, waiting for a compile in flight (until ctx is done).
// With a nil program, the caller compiles; when owner is also true it must report the
// outcome with finish, and other calls of the same program wait for it meanwhile.
func (pc *programCache) lookup(ctx context.Context, k programKey) (p *program, owner bool) {
	pc.mu.Lock()
	if pc.m == nil {
		pc.m = make(map[programKey]*program)
	}
	p = pc.m[k]
	if p == nil {
		p = &program{ready: make(chan struct{})}
		pc.m[k] = p
		pc.mu.Unlock()
		pc.compiles.Add(1)
		return p, true
	}
	if p.elem != nil {
		pc.lru.MoveToFront(p.elem)
	}
	pc.mu.Unlock()
	select {
	case <-p.ready:
		if p.ok {
			return p, false
		}
	case <-ctx.Done():
	}
	pc.compiles.Add(1)
	return nil, false
}

// finish records the outcome of the compile that lookup handed to its owner: the
// bytecode and its fuel when ok, else the entry goes, and the next call compiles again
// (a failed compile depends on nothing but its input, but its error is not worth keeping).
func (pc *programCache) finish(k programKey, p *program, bytecode []byte, fuel int64, ok bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	defer close(p.ready)
	if !ok || len(bytecode) > programMaxBytes {
		delete(pc.m, k)
		return
	}
	p.ok, p.bytecode, p.fuel = true, bytecode, fuel
	p.elem = pc.lru.PushFront(k)
	pc.bytes += len(bytecode)
	for pc.bytes > programCacheBytes {
		last := pc.lru.Back()
		lk := last.Value.(programKey)
		pc.lru.Remove(last)
		pc.bytes -= len(pc.m[lk].bytecode)
		delete(pc.m, lk)
	}
}

// fuelOf is the fuel of k's compile, 0 when it is not kept; for tests.
func (pc *programCache) fuelOf(k programKey) int64 {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if p := pc.m[k]; p != nil && p.ok {
		return p.fuel
	}
	return 0
}
