package store

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Verify "checks ... that the chain ends at the recorded head": it reads the head and
// the events as of one moment, so a log that grows while it is verified verifies (an
// event committed between the read of the head and the walk is not "beyond the head").
func TestVerifyWhileTheLogGrows(t *testing.T) {
	s, _ := openMem(t)
	mustAppend(t, s, "p", "note", `{}`)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 3000 && !stop.Load(); i++ {
			if _, err := s.Append(ctx, "p", "note", []byte(`{"n":1}`)); err != nil {
				t.Error(err)
				return
			}
		}
		stop.Store(true)
	}()
	for n := 0; !stop.Load(); n++ {
		if err := s.Verify("p"); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("verify %d, while events were appended: %v", n, err)
		}
	}
	wg.Wait()
	if err := s.Verify("p"); err != nil {
		t.Fatal(err)
	}
}
