//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/proc"
)

// Tests of the process group guard (group_linux.go). A group is gone
// when none of its processes runs (proc.WaitGroupGone): an orphan's zombie
// waits for init, which here reaps every two seconds or so.

// startGroupForTest starts sh -c script in a guarded group and returns it
// with the first line of its stdout.
func startGroupForTest(t *testing.T, script string) (*exec.Cmd, *procGroup, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := startInGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	return cmd, g, strings.TrimSpace(line)
}

// The guard SIGKILLs the whole group, grandchildren too, when its
// control pipe closes without the done byte: what distlock's death does.
func TestGroupGuardKillsOnParentDeath(t *testing.T) {
	t.Parallel()
	cmd, g, line := startGroupForTest(t, "sleep 100 & echo $!; sleep 100")
	grandchild, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	if pg, err := syscall.Getpgid(grandchild); err != nil || pg != g.pgid {
		t.Fatalf("grandchild %d in group %d (%v), want the guard's %d", grandchild, pg, err, g.pgid)
	}
	if pg, _ := syscall.Getpgid(cmd.Process.Pid); pg != g.pgid {
		t.Fatalf("command in group %d, want the guard's %d", pg, g.pgid)
	}
	g.ctl.Close() // as the kernel does when distlock dies
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("command: %v, want killed by SIGKILL", err)
	}
	g.guard.Wait() // our zombie holds the group's id
	if err := proc.WaitGroupGone(g.pgid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// Told distlock is done, the guard exits and kills nothing (what the
// command left behind on its own stays, as before).
func TestGroupGuardReleased(t *testing.T) {
	t.Parallel()
	cmd, g, line := startGroupForTest(t, "sleep 100 & echo $!")
	grandchild, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	defer syscall.Kill(grandchild, syscall.SIGKILL)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("command: %v", err)
	}
	g.release()
	if g.guard.ProcessState == nil || !g.guard.ProcessState.Success() {
		t.Fatalf("guard after release: %v, want exit 0", g.guard.ProcessState)
	}
	if err := syscall.Kill(grandchild, 0); err != nil {
		t.Errorf("grandchild %d after release: %v, want alive", grandchild, err)
	}
}

// Run by hand (not a process group's leader), the hidden mode kills
// nobody's group. Here it joins a group led by a sleep, so a guard that
// killed its group anyway would kill only that sleep.
func TestGroupGuardByHand(t *testing.T) {
	t.Parallel()
	leader := exec.Command("sleep", "100")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	defer leader.Wait()
	defer leader.Process.Kill()
	g := exec.Command(binary(t), guardArg) // stdin: /dev/null, EOF at once
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: leader.Process.Pid}
	out, err := g.CombinedOutput()
	if code := g.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), "not for use by hand") {
		t.Errorf("guard by hand: exit %d (%v), output %q; want %d", code, err, out, exitUsage)
	}
	if err := leader.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the group's leader: %v, want alive", err)
	}
}

// TestNoLockOSThread backs group_linux.go's argument that COMMAND's
// Pdeathsig fires only when distlock dies: the signal comes when the
// thread that forked COMMAND exits, and the Go runtime ends a thread only
// when a goroutine locked to it (runtime.LockOSThread) exits locked. No
// package distlock links outside the standard library calls it (the
// standard library does so only on Windows and Plan 9, and in the
// runtime, whose locked threads live as long as the process).
func TestNoLockOSThread(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .CgoFiles}} {{.}}{{end}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	call := regexp.MustCompile(`\bLockOSThread\(`)
	files := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		for _, name := range f[1:] {
			b, err := os.ReadFile(filepath.Join(f[0], name))
			if err != nil {
				t.Fatal(err)
			}
			files++
			if call.Match(b) {
				t.Errorf("%s calls runtime.LockOSThread: a goroutine that exits locked ends its thread, and COMMAND's Pdeathsig would fire if that thread forked it (see group_linux.go)", filepath.Join(f[0], name))
			}
		}
	}
	if files < 100 {
		t.Fatalf("only %d files listed: go list output %q", files, out)
	}
}

// killTries is how many distlocks TestRunKilled SIGKILLs on each store.
const killTries = 10

// TestRunKilled: a distlock run killed with SIGKILL (kill -9, the OOM
// killer) takes COMMAND's whole process group with it, grandchildren too,
// at once; a second distlock run waiting for the same lock starts its
// COMMAND only after the lease expired, and by then the first group is
// long gone: no two COMMANDs ever overlap. killTries times on each store,
// all at once (one TTL for all): some killed as soon as COMMAND started,
// the others with a waiter in line, at random moments.
// killBatch is how many of TestRunKilled's tries run at once.
const killBatch = 2

func TestRunKilled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		// Twenty distlocks: more than testCtx's two minutes on a loaded
		// machine.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir := t.TempDir()
		type try struct {
			lock, out  string
			pgid       int
			early      bool
			holder     *bgProc
			waiter     *bgProc
			killedWhen time.Time
		}
		tries := make([]*try, killTries)
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for i, tr := range tries {
				if tr == nil {
					continue // its batch never started
				}
				for _, p := range []*bgProc{tr.holder, tr.waiter} {
					if p == nil {
						continue
					}
					select {
					case <-p.done:
						t.Logf("try %d: distlock %d exited %d; stderr: %s", i, p.cmd.Process.Pid, p.code, p.stderr)
					default:
						t.Logf("try %d: distlock %d still running; stderr: %s", i, p.cmd.Process.Pid, p.stderr)
					}
				}
			}
		})
		// COMMAND forks a grandchild into its group; both append to
		// the try's file (O_APPEND: one order for every writer) until
		// killed.
		const holderScript = `out=$1
sh -c 'echo "child $$"; while :; do echo "tick $$" >> "$0"; sleep 0.05; done' "$out" &
echo "cmd $$"
while :; do echo "tick $$" >> "$out"; sleep 0.05; done`
		// The waiter's COMMAND records its start, then whether a process
		// of the first COMMAND's group still runs: a stat line "pid (comm)
		// state ppid pgrp ..." of that group in a state other than
		// zombie (dead, waiting for init to reap it) or dead.
		const waiterScript = `out=$1 pgid=$2
echo "start $$" >> "$out"
if cat /proc/[0-9]*/stat 2>/dev/null | grep -qE "\) [^ZX] [0-9]+ $pgid "; then echo "overlap: group $pgid alive" >> "$out"; else echo "clear" >> "$out"; fi`
		kill := func(tr *try) {
			tr.killedWhen = time.Now()
			if err := tr.holder.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
		// A few tries at a time: each is two distlocks and a guard, race
		// built; twenty of them at once on two CPUs starved their
		// keepalives past the TTL.
		for lo := 0; lo < killTries; lo += killBatch {
			batch := tries[lo:min(lo+killBatch, killTries)]
			// One after the other: ten sessions opened at once can take a
			// loaded ZooKeeper ensemble longer than go-zookeeper's connect
			// timeout allows ("sync: zk: connection closed").
			for i := range batch {
				tr := &try{lock: lockName(t), out: filepath.Join(dir, fmt.Sprintf("out-%d", lo+i)), early: (lo+i)%3 == 0}
				batch[i] = tr
				tr.holder = start(ctx, t, b.args("run", "--lock", tr.lock, "--ttl=10s", "--dial-timeout=30s", "--", "sh", "-c", holderScript, "sh", tr.out)...)
				line := tr.holder.nextLine(ctx, "the holder's COMMAND pid")
				pid, err := strconv.Atoi(strings.TrimPrefix(line, "cmd "))
				if err != nil {
					line2 := tr.holder.nextLine(ctx, "the holder's COMMAND pid")
					pid, err = strconv.Atoi(strings.TrimPrefix(line2, "cmd "))
					if err != nil {
						t.Fatalf("holder said %q, %q; want cmd PID", line, line2)
					}
				}
				if tr.pgid, err = syscall.Getpgid(pid); err != nil {
					t.Fatalf("COMMAND %d: %v", pid, err)
				}
				if mine, _ := syscall.Getpgid(0); tr.pgid == mine {
					t.Fatalf("COMMAND %d runs in the test's own process group", pid)
				}
				if tr.early {
					kill(tr) // COMMAND has just started
				}
			}
			for _, tr := range batch {
				tr.waiter = start(ctx, t, b.args("run", "--lock", tr.lock, "--ttl=10s", "--dial-timeout=30s", "--", "sh", "-c", waiterScript, "sh", tr.out, strconv.Itoa(tr.pgid))...)
				if !tr.early {
					b.waitQueued(t, tr.lock, 2)
				}
			}
			for _, tr := range batch {
				if !tr.early {
					time.Sleep(rand.N(100 * time.Millisecond))
					kill(tr)
				}
			}
			for i, tr := range batch {
				i := lo + i
				if code := tr.holder.wait(time.Minute); code != 128+int(syscall.SIGKILL) {
					t.Errorf("try %d: the killed distlock exited %d, want 137; stderr %s", i, code, tr.holder.stderr)
				}
				if err := proc.WaitGroupGone(tr.pgid, 10*time.Second); err != nil {
					t.Errorf("try %d: COMMAND's group, %v after distlock's SIGKILL: %v", i, time.Since(tr.killedWhen), err)
				}
			}
			for i, tr := range batch {
				i := lo + i
				if code := tr.waiter.wait(time.Minute); code != 0 {
					t.Errorf("try %d: the waiter exited %d; stderr %s", i, code, tr.waiter.stderr)
				}
				data, err := os.ReadFile(tr.out)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(data)), "\n")
				start := -1
				for j, l := range lines {
					if strings.HasPrefix(l, "start ") {
						start = j
						break
					}
				}
				switch {
				case start < 0:
					t.Errorf("try %d: the waiter's COMMAND never started: %q", i, lines)
				case start+1 >= len(lines) || lines[start+1] != "clear":
					t.Errorf("try %d: the waiter's COMMAND started while the killed one's group ran: %q", i, lines[start:])
				}
				for _, l := range lines[start+1:] {
					if strings.HasPrefix(l, "tick ") {
						t.Errorf("try %d: the killed COMMAND's group wrote after the next holder's COMMAND started: %q", i, lines[start:])
						break
					}
				}
			}
		}
		t.Logf("%d distlocks killed, %d of them as COMMAND started; every group gone at once, every waiter's COMMAND started after it", killTries, (killTries+2)/3)
	})
}
