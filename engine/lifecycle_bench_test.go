package engine_test

import (
	"context"
	"testing"

	"github.com/agentlibos/libos/engine"
	"github.com/agentlibos/libos/tools"
)

// BenchmarkLoadDefaultImage: parse and check the embedded manifest and its two Skills.
func BenchmarkLoadDefaultImage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tools.DefaultImage(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnImage: a durable spawn of the default image (record + event, synced).
func BenchmarkSpawnImage(b *testing.B) {
	img := loadImage(b, "echo.yaml")
	ctx := context.Background()
	e2 := newEnv(b, engine.Config{Builtins: []engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e2.k.SpawnImage(ctx, img); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEchoSkillGate: an echo call while a Skill is active (the gate on the path).
func BenchmarkEchoSkillGate(b *testing.B) {
	e := newEnv(b, engine.Config{Builtins: []engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}})
	ctx := context.Background()
	img := loadImage(b, "echo.yaml")
	img.Limits.MaxCalls = 0
	pid, err := e.k.SpawnImage(ctx, img)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.k.ActivateSkill(ctx, pid, "echo-check"); err != nil {
		b.Fatal(err)
	}
	frame := []byte(`{"name":"echo","arguments":"{\"x\":1}"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.k.HandleFrame(ctx, pid, frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointFork: a checkpoint of a process with 100 kv entries, then a fork.
func BenchmarkCheckpointFork(b *testing.B) {
	e := newEnv(b, engine.Config{Builtins: []engine.Tool{tools.Echo(), tools.Skill(), tools.DeactivateSkill()}})
	ctx := context.Background()
	pid, err := e.k.SpawnImage(ctx, loadImage(b, "echo.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := e.st.KVPut(ctx, pid, "key-"+string(rune('a'+i%26))+string(rune('a'+i/26)), []byte(`"some value"`)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ck, err := e.k.Checkpoint(ctx, pid)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.k.Fork(ctx, ck); err != nil {
			b.Fatal(err)
		}
	}
}
