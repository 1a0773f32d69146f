package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestOnceCrash: the same `distlock once --every` line started on three
// "servers" at once (three processes, as cron starts them), the runner
// SIGKILLed at a random point of its command's run, six rounds per store.
// In each round exactly one of the other two runs the command again, once
// the killed one's lease or session is gone (--ttl 2 s on etcd, 1 s on
// ZooKeeper), and the third finds the slot done; a run of the next slot,
// started right after the kill, is not delayed by the dead holder. Each
// round is a job of its own (lock crash/rN): --every's slots are cron's
// minutes, too long to wait for one per round.
func TestOnceCrash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		ttl := "2s"
		if b.name == "zk" {
			ttl = "1s"
		}
		fifo := filepath.Join(t.TempDir(), "events")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		// Held open read-write by the test, the fifo never blocks the
		// commands' opens.
		ff, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer ff.Close()
		events := make(chan []string, 100)
		go func() {
			sc := bufio.NewScanner(ff)
			for sc.Scan() {
				events <- strings.Fields(sc.Text())
			}
		}()
		// The command reports its distlock's pid ($PPID: distlock runs
		// sh itself) as it starts and ends.
		cmd := `echo "start $PPID" > ` + fifo + `; sleep 0.6; echo "end $PPID" > ` + fifo
		var delays []time.Duration
		for round := range 6 {
			// The slot is the current minute and ends with it: leave the
			// rerun room in it (wall-clock time, not an event to wait on).
			if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 10*time.Second {
				time.Sleep(left + 100*time.Millisecond)
			}
			lock := fmt.Sprintf("crash/r%d", round)
			procs := map[int]*exec.Cmd{}
			done := make(chan error, 3)
			for range 3 {
				c := exec.CommandContext(ctx, binary(t), b.args("once", "--lock", lock, "--every", "* * * * *", "--ttl", ttl, "--", "sh", "-c", cmd)...)
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				procs[c.Process.Pid] = c
				go func() { done <- c.Wait() }()
			}
			next := func(what string) []string {
				t.Helper()
				select {
				case e := <-events:
					return e
				case <-ctx.Done():
					t.Fatalf("round %d: %s: %v", round, what, ctx.Err())
					return nil
				}
			}
			var starts []int
			slot := time.Now().UTC().Truncate(time.Minute).Format("2006-01-02T15:04Z")
			e := next("the first run's start")
			if e[0] != "start" {
				t.Fatalf("round %d: %v before any start", round, e)
			}
			var victim int
			fmt.Sscan(e[1], &victim)
			starts = append(starts, victim)
			// At a random point of the run (it lasts 600 ms).
			time.Sleep(50*time.Millisecond + rand.N(400*time.Millisecond))
			if err := procs[victim].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			// The next slot's run takes another lock: the dead holder's
			// entry does not delay it.
			nextDone := make(chan result, 1)
			go func() {
				slot := "next-" + strings.ReplaceAll(lock, "/", "-")
				nextDone <- cli(ctx, t, nil, b.args("once", "--lock", lock, "--slot", slot, "--wait", "1s", "--ttl", ttl, "--", "true")...)
			}()
			var ends []int
			record := func(e []string) {
				var pid int
				fmt.Sscan(e[1], &pid)
				if e[0] == "start" {
					starts = append(starts, pid)
					delays = append(delays, time.Since(killed))
				} else {
					ends = append(ends, pid)
				}
			}
			for exited := 0; exited < 3; {
				select {
				case e := <-events:
					record(e)
				case err := <-done:
					exited++
					if err != nil && !strings.Contains(err.Error(), "killed") {
						t.Errorf("round %d: a distlock once: %v", round, err)
					}
				case <-ctx.Done():
					t.Fatalf("round %d: %v", round, ctx.Err())
				}
			}
			// Every command has reported by now: its writes precede its
			// distlock's exit.
		drain:
			for {
				select {
				case e := <-events:
					record(e)
				default:
					break drain
				}
			}
			if r := <-nextDone; r.code != 0 {
				t.Errorf("round %d: the next slot, right after the kill: exit %d, stderr %q", round, r.code, r.stderr)
			}
			switch {
			case len(starts) != 2 || starts[1] == victim:
				t.Errorf("round %d: runs by distlock pids %v (killed %d), want one rerun on another", round, starts, victim)
			case len(ends) != 1 || ends[0] != starts[1]:
				t.Errorf("round %d: ends %v, want the rerun's (%d) alone", round, ends, starts[1])
			}
			if _, ok := b.markerOf(t, lock, slot); !ok && !t.Failed() {
				t.Errorf("round %d: no marker for the slot", round)
			}
			if slices.Contains(starts, 0) {
				t.Errorf("round %d: pids %v", round, starts)
			}
		}
		slices.Sort(delays)
		if len(delays) > 0 {
			t.Logf("%s, --ttl %s: each killed slot's command started again %v..%v after the kill, on the slot's lock (e.g. %s)", b.name, ttl,
				delays[0].Round(10*time.Millisecond), delays[len(delays)-1].Round(10*time.Millisecond), distlock.SlotLockName("crash/r0", "2026-12-01T08:00Z"))
		}
	})
}
