package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"golang.org/x/sys/unix"
)

func TestProgressLine(t *testing.T) {
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := start.Add(12 * time.Second)
	me := "web2 pid 2 distlock run since 2026-12-01T08:00:00Z"
	q := []distlock.QueueEntry{
		{Holder: "web1 pid 1 distlock run since 2026-12-01T07:59:19Z", Holding: true},
		{Holder: "web3 pid 3 distlock run", Created: start.Add(-time.Second)},
		{Holder: me},
	}
	for _, c := range []struct {
		q    []distlock.QueueEntry
		want string
	}{
		{nil, "waiting for lock L: joining the queue; waited 12s"},
		{q, "waiting for lock L: position 3 of 3, held by web1 pid 1 distlock run since 2026-12-01T07:59:19Z for 53s; waited 12s"},
		{[]distlock.QueueEntry{{Owner: "abc", Holding: true, Created: start}, {Holder: me}}, "waiting for lock L: position 2 of 2, held by owner abc for 12s; waited 12s"},
	} {
		if got := progressLine("L", me, c.q, start, now); got != c.want {
			t.Errorf("progressLine:\n got %q\nwant %q", got, c.want)
		}
	}
}

// openPTY opens a pseudo-terminal pair: the master to read what the
// command writes, the slave to give it as its stderr.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestRunProgress runs `distlock run` behind a holder with its stderr on
// a terminal: it shows its place in the queue and the holder, and once
// the holder lets go it clears the line and runs. Off a terminal it says
// nothing while it waits.
func TestRunProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		const name = "progress/lock"
		held, err := b.mutex(t, name, "the holder").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		master, slave := openPTY(t)
		cmd := exec.CommandContext(ctx, binary(t), b.args("run", "--lock", name, "--", "true")...)
		cmd.Stderr = slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		// The display redraws with "\r"; read up to each.
		r := bufio.NewReader(master)
		var seen strings.Builder
		for !strings.Contains(seen.String(), "position 2 of 2, held by the holder") {
			chunk, err := r.ReadString('\r')
			seen.WriteString(chunk)
			if err != nil {
				t.Fatalf("the terminal shows no place in the queue: %q (%v)", seen.String(), err)
			}
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run: %v; terminal: %q", err, seen.String())
		}

		// Off a terminal: nothing while waiting.
		held, err = b.mutex(t, name, "the holder").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd = exec.CommandContext(ctx, binary(t), b.args("run", "--lock", name, "--", "true")...)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		b.waitQueued(t, name, 2)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stderr.String(), "waiting for lock") {
			t.Errorf("off a terminal, run wrote %q while waiting", stderr.String())
		}
	})
}
