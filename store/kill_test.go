package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const killChildEnv = "LIBOS_STORE_KILL_CHILD"

// TestKillChild is the child side of TestSIGKILL: it appends events from four
// goroutines until killed, printing "ack <seq> <writer> <i> ." after each append
// has been synced.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("child process of TestSIGKILL")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Printf("open-error %v\n", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				data := fmt.Sprintf(`{"w":%d,"i":%d,"run":%q}`, w, i, os.Getenv("LIBOS_STORE_KILL_RUN"))
				var e Event
				err := s.Update(ctx, func(tx *Tx) error {
					var err error
					if e, err = tx.Append("k", "note", json.RawMessage(data)); err != nil {
						return err
					}
					return tx.KVPut("k", fmt.Sprintf("seq/%d", e.Seq), []byte(data))
				})
				if err != nil {
					fmt.Printf("error %v\n", err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Printf("ack %d %d %d .\n", e.Seq, w, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// "A real kill test (bounded in count and time): a child process appends events and
// prints an acknowledgement after each synced commit; the parent SIGKILLs it at
// random moments, reopens, and checks that every acknowledged event is there and
// the hash chain verifies." Also: "a second process opening the same directory gets
// a clear 'in use' error".
func TestSIGKILL(t *testing.T) {
	kills, budget := 20, 20*time.Second
	if testing.Short() || raceEnabled {
		kills, budget = 5, 10*time.Second
	}
	if v, _ := strconv.Atoi(os.Getenv("LIBOS_STORE_KILLS")); v > 0 {
		kills = v
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	deadline := time.Now().Add(budget)
	done, totalAcked, checkedInUse := 0, 0, false
	for round := 0; round < kills && time.Now().Before(deadline); round++ {
		cmd := exec.Command(exe, "-test.run=^TestKillChild$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, fmt.Sprintf("LIBOS_STORE_KILL_RUN=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		type ack struct {
			seq  uint64
			data string
		}
		acks := make(chan ack, 1<<16)
		var other []string
		readDone := make(chan struct{})
		first := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(out)
			once := sync.Once{}
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 5 && f[0] == "ack" && f[4] == "." {
					seq, _ := strconv.ParseUint(f[1], 10, 64)
					acks <- ack{seq, fmt.Sprintf(`{"w":%s,"i":%s,"run":"%d"}`, f[2], f[3], round)}
					once.Do(func() { close(first) })
				} else if !strings.HasPrefix(sc.Text(), "ack") && !strings.HasPrefix(sc.Text(), "PASS") {
					other = append(other, sc.Text())
				}
			}
		}()
		select {
		case <-first:
		case <-readDone:
			cmd.Wait()
			t.Fatalf("child exited without acknowledging: %v", other)
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("child never acknowledged")
		}
		if !checkedInUse {
			_, err := Open(dir, Options{})
			wantCode(t, err, CodeInUse)
			// A read-only open's shared lock conflicts with the writer's too.
			_, err = Open(dir, Options{ReadOnly: true})
			wantCode(t, err, CodeInUse)
			checkedInUse = true
		}
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone
		cmd.Wait()
		close(acks)
		if len(other) > 0 {
			t.Fatalf("child reported: %v", other)
		}
		var acked []ack
		for a := range acks {
			acked = append(acked, a)
		}
		// A read-only open of the killed writer's store shows every acknowledged event
		// (replaying its WAL in memory) and leaves the files as the kill left them.
		before := dirState(t, dir)
		ro, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open after kill %d: %v", round, err)
		}
		for _, a := range acked {
			if e, err := ro.Event("k", a.seq); err != nil || string(e.Data) != a.data {
				t.Fatalf("kill %d, read-only: acknowledged event %d: %s, %v", round, a.seq, e.Data, err)
			}
		}
		if err := ro.Verify("k"); err != nil {
			t.Fatalf("kill %d, read-only: %v", round, err)
		}
		ro.Close()
		sameState(t, fmt.Sprintf("a read-only open after kill %d", round), before, dirState(t, dir))
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("reopen after kill %d: %v", round, err)
		}
		n := 0
		for _, a := range acked {
			e, err := s.Event("k", a.seq)
			if err != nil {
				t.Fatalf("kill %d: acknowledged event %d lost: %v", round, a.seq, err)
			}
			if string(e.Data) != a.data {
				t.Fatalf("kill %d: event %d is %s, acknowledged %s", round, a.seq, e.Data, a.data)
			}
			v, err := s.KVGet("k", fmt.Sprintf("seq/%d", a.seq))
			if err != nil || string(v) != a.data {
				t.Fatalf("kill %d: kv of event %d: %q, %v", round, a.seq, v, err)
			}
			n++
		}
		if err := s.Verify("k"); err != nil {
			t.Fatalf("kill %d: %v", round, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		totalAcked += n
		done++
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, _ := s.Head("k")
	t.Logf("%d SIGKILLs, %d acknowledged events checked, %d events in the verified chain", done, totalAcked, h.Seq)
	if done < 3 {
		t.Fatalf("only %d kills within %v", done, budget)
	}
}
