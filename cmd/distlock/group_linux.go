//go:build linux

package main

// COMMAND's process group dies with distlock, however distlock dies.
//
// A distlock killed with SIGKILL (kill -9, the OOM killer) runs no code:
// its lock goes when the lease or session expires, after the TTL, and the
// next holder starts its COMMAND then. Had COMMAND outlived distlock, two
// COMMANDs would run at once. So on Linux COMMAND never outlives it:
//
//   - distlock first starts a guard: itself again (/proc/self/exe, the
//     binary distlock runs from even if it was replaced on disk since),
//     in the hidden mode guardArg, in a process group of its own, with
//     the read end of a pipe whose only write end distlock holds as its
//     stdin. The guard ignores the signals distlock forwards, says it is
//     ready, and blocks reading the pipe.
//   - COMMAND is started only then, into the guard's process group
//     (Setpgid with Pgid = the guard's pid), with Pdeathsig SIGKILL.
//     Everything COMMAND forks stays in that group unless it moves out
//     on purpose (setsid, setpgid).
//   - When distlock is done with the group it writes guardDone; the guard
//     exits and kills nothing. When distlock dies, the kernel closes its
//     end of the pipe: the guard's read returns EOF without guardDone and
//     the guard SIGKILLs its own process group, COMMAND and everything
//     COMMAND left in it, at once: milliseconds after distlock's death,
//     far below any TTL. kill(2) on a process group is atomic with fork
//     (the kernel restarts a fork that a group signal overtakes), so no
//     process forked at that moment slips out.
//
// Why the pipe, and not Pdeathsig, tells the guard: the pipe is made
// before the guard is forked and its write end is close-on-exec (Go's
// os.Pipe), so no other process holds it: EOF comes whenever distlock
// dies, before, during or after the guard's start, and only then.
// Pdeathsig on the guard would fire when the thread that forked it exits
// (go.dev/issue/27505) and, were that ever to happen while distlock
// lives, kill COMMAND for nothing.
//
// Why Pdeathsig on COMMAND as well: it closes the one window the guard
// cannot see, distlock dying between forking COMMAND and COMMAND joining
// the guard's group (the guard's kill would miss it). It cannot race the
// fork: Go's child (syscall.forkAndExecInChild1 in
// $GOROOT/src/syscall/exec_linux.go) calls prctl(PR_SET_PDEATHSIG)
// before exec, after setpgid, and then compares getppid() with the pid
// the parent recorded before forking; if they differ the parent is gone
// already and the child kills itself with the signal. So a COMMAND whose
// distlock died before the prctl never execs; one whose distlock dies
// later gets SIGKILL from the kernel, or from the guard once it is in the
// group. go.dev/issue/27505 says the signal comes when the forking *thread*
// exits, which may be before the process does. The Go runtime ends a
// thread only when a goroutine locked to it (runtime.LockOSThread) exits
// without unlocking; neither distlock nor any package it links calls
// LockOSThread (TestNoLockOSThread checks its dependencies; in the
// standard library only the runtime does on Linux, for threads that live
// as long as the process), so distlock's threads live as long as
// distlock, and the signal comes only with distlock's death.
//
// Why a guard beside COMMAND and not one between distlock and COMMAND (a
// guard that starts COMMAND itself): distlock stays COMMAND's parent, so
// COMMAND's exit status, start errors (127, 126), stdio and signals work
// as before, with no protocol to relay them; and the guard, the group's
// leader, keeps the group's id from being reused by an unrelated process
// for as long as distlock may still signal it (distlock reaps the guard
// last). The price: COMMAND's pid is not its process group id, and the
// group holds one more process (distlock's guard, which ignores SIGHUP,
// SIGINT, SIGTERM, SIGQUIT and the terminal stop signals; SIGKILL to the
// group, as on a lost lock, ends it with the rest). The guard is a whole
// Go program (about 20 MB resident, 3 MB of it its own heap, the rest
// the binary's pages); it costs one fork and exec and the wait for its
// "ready" (tens of milliseconds) before COMMAND starts. A guard killed on
// its own leaves COMMAND as unguarded as before it existed.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// guardArg, as distlock's only argument, runs it as a process group's
// guard (guardMain) instead of a command.
const guardArg = "__distlock-group-guard"

// guardDone, written on the guard's stdin, tells it distlock is done with
// the group: exit, kill nothing.
const guardDone = 'd'

// guardReadyWait bounds the guard's start (a Go program's start: tens of
// milliseconds; more under the race detector on a busy machine);
// guardExitWait how long release waits for it to exit.
const (
	guardReadyWait = time.Minute
	guardExitWait  = 5 * time.Second
)

func init() {
	// In init, not main, so that a test binary running underLock (the
	// guard is whatever binary /proc/self/exe is) is a guard too, and
	// never runs its tests as one.
	if len(os.Args) == 2 && os.Args[1] == guardArg {
		os.Exit(guardMain(os.Stdin, os.NewFile(3, "ready")))
	}
}

// guardMain is the guard: it tells ready it is in place, then waits on
// ctl for guardDone, or for EOF (distlock died: kill the group).
func guardMain(ctl, ready *os.File) int {
	// COMMAND's signals reach the whole group, the guard too.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	if syscall.Getpgrp() != os.Getpid() {
		// Not started by startInGroup (which makes the guard a group
		// leader): kill nobody's group.
		fmt.Fprintln(os.Stderr, "distlock: internal process group guard, not for use by hand")
		return exitUsage
	}
	if ready != nil {
		ready.Write([]byte{'r'}) // an error: distlock died; the read says so
		ready.Close()
	}
	var b [1]byte
	n, _ := ctl.Read(b[:])
	if n == 1 && b[0] == guardDone {
		return exitOK
	}
	// EOF (or an error) without guardDone: distlock died. SIGKILL the
	// group, this process included.
	syscall.Kill(0, syscall.SIGKILL)
	return exitFailure // not reached
}

// guardError is a failure of the guard, not of COMMAND: it may not be
// taken for COMMAND's "not found".
type guardError struct{ err error }

func (e *guardError) Error() string {
	return fmt.Sprintf("cannot start distlock's process group guard (it kills the command if distlock dies): %v", e.err)
}
func (e *guardError) Unwrap() error { return e.err }

// procGroup is the process group COMMAND was started in.
type procGroup struct {
	pgid  int       // the guard's pid
	ctl   *os.File  // the write end of the guard's stdin
	guard *exec.Cmd // the guard
}

// release tells the guard distlock is done with the group (COMMAND has
// ended and whatever it left behind was killed or is meant to stay): the
// guard exits without killing anything. Call it once, after the last
// signal to the group.
func (g *procGroup) release() {
	g.ctl.Write([]byte{guardDone}) // EPIPE if the guard was killed with the group: fine
	g.ctl.Close()
	// Reaped only now: until distlock's last signal to the group, the
	// guard (alive, or a zombie of distlock's) keeps the group's id from
	// being reused. It exits as soon as it reads guardDone; not waiting
	// forever, though: a guard stopped (SIGSTOP to the group) exits once
	// continued, whatever becomes of distlock.
	reaped := make(chan struct{})
	go func() {
		g.guard.Wait()
		close(reaped)
	}()
	t := time.NewTimer(guardExitWait)
	defer t.Stop()
	select {
	case <-reaped:
	case <-t.C:
	}
}

// startInGroup starts cmd (whose SysProcAttr it sets) in a process group
// that a guard process kills if distlock dies (see the top of this file).
// Errors starting the guard are *guardError; others are cmd.Start's.
func startInGroup(cmd *exec.Cmd) (*procGroup, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, &guardError{err}
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, &guardError{err}
	}
	guard := exec.Command("/proc/self/exe", guardArg)
	guard.Args[0] = os.Args[0] // ps shows "distlock __distlock-group-guard"
	guard.Stdin = ctlR
	guard.ExtraFiles = []*os.File{readyW}
	guard.Dir = "/" // pin no directory
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = guard.Start()
	ctlR.Close()
	readyW.Close()
	if err != nil {
		readyR.Close()
		ctlW.Close()
		return nil, &guardError{err}
	}
	g := &procGroup{pgid: guard.Process.Pid, ctl: ctlW, guard: guard}
	readyR.SetReadDeadline(time.Now().Add(guardReadyWait))
	var b [1]byte
	n, err := readyR.Read(b[:])
	readyR.Close()
	if n != 1 {
		guard.Process.Kill()
		g.release()
		if err == nil {
			err = errors.New("no ready byte")
		}
		return nil, &guardError{fmt.Errorf("it did not get ready: %v", err)}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: guard.Process.Pid, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		g.release()
		return nil, err
	}
	return g, nil
}
