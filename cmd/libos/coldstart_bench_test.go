package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The cold start of a CI job: "libos validate one.json with an empty cache dir, whole
// process". Each iteration execs the binary with a fresh --cache-dir, so it pays
// wazero's compilation of the guest; BenchmarkValidateWarmStart runs the same command
// on a cache that 'libos cache warm' filled, as a CI cache step leaves it.
//
//	go test ./cmd/libos -run '^$' -bench 'ValidateColdStart|ValidateWarmStart' -benchtime 10x
func BenchmarkValidateColdStart(b *testing.B) {
	cand := filepath.Join("..", "..", "testdata", "candidates", "good_sum_exact.json")
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cache := b.TempDir()
		b.StartTimer()
		execValidate(b, cache, cand)
	}
}

func BenchmarkValidateWarmStart(b *testing.B) {
	cand := filepath.Join("..", "..", "testdata", "candidates", "good_sum_exact.json")
	cache := b.TempDir()
	if out, err := exec.Command(libosBin, "cache", "warm", "--cache-dir", cache).CombinedOutput(); err != nil {
		b.Fatalf("cache warm: %v\n%s", err, out)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		execValidate(b, cache, cand)
	}
}

func execValidate(b *testing.B, cache, cand string) {
	b.Helper()
	cmd := exec.Command(libosBin, "validate", "--cache-dir", cache, cand)
	cmd.Env = append(os.Environ(), "LIBOS_DATA="+filepath.Join(cache, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("validate: %v\n%s", err, out)
	}
}
