package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// events --follow "keeps printing new events until interrupted": an interrupt ends it
// with exit 0 whenever it comes, also while the command is asking the running 'libos
// serve' for more events. Interrupts at moments spread over one poll interval (300 ms),
// so that some land inside a request.
func TestEventsFollowEndsCleanlyOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "store")
	_, _, stderr := startServe(t, ctx, data)
	pid := spawnedPID(t, stderr)
	for i := range 12 {
		follow := exec.Command(libosBin, "events", pid, "--follow", "--json", "--data", data)
		follow.Env = testEnv(t)
		out := &syncBuffer{}
		follow.Stdout, follow.Stderr = out, out
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		// The first events are printed once the command runs and has asked serve.
		for j := 0; j < 500 && out.String() == ""; j++ {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(i) * 25 * time.Millisecond)
		_ = follow.Process.Signal(os.Interrupt)
		if err := follow.Wait(); err != nil {
			t.Fatalf("interrupt %d (%d ms into following): %v\n%s", i, i*25, err, out.String())
		}
	}
}
