//go:build unix

// Package proc pauses and continues processes for real, the way a long GC
// pause or a stalled VM stops them: SIGSTOP and SIGCONT, and the kernel's
// own word (/proc) that the stop has taken effect. The distlock demo and
// the integration harness (its lock holders and servers) share it.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// State returns the state letter of process pid from /proc/PID/stat (R,
// S, D, T, t, Z, ...), or 0 when there is no such process.
func State(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return 0, nil
		}
		return 0, err
	}
	return statState(fmt.Sprintf("/proc/%d/stat", pid), b)
}

// statState is the state letter of a stat file's content b: "pid (comm)
// state ...", where comm may hold spaces and parentheses.
func statState(file string, b []byte) (byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("proc: unexpected %s: %q", file, b)
	}
	return b[i+2], nil
}

// IsStopped reports whether state st is a stop (T, or t under a tracer).
func IsStopped(st byte) bool { return st == 'T' || st == 't' }

// stopped returns nil once every thread of pid is stopped: a signal stops
// the threads one by one, and a thread still running could still send a
// keepalive.
func stopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("no threads of %d in /proc: %v", pid, err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		st, err := statState(f, b)
		if err != nil {
			return err
		}
		if !IsStopped(st) {
			return fmt.Errorf("%s: state %c", f, st)
		}
	}
	return nil
}

// haveProc reports whether this system has a Linux-style /proc.
func haveProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// Pause stops process group pgid (a process started with Setpgid, and
// whatever it started) with SIGSTOP, and returns once every thread of its
// leader is stopped, or with an error when ctx ends first. The kernel
// tells a parent about a stop only through wait, which exec.Cmd owns, so
// Pause reads the threads' states instead; where there is no /proc it
// can only give the signal a moment.
func Pause(ctx context.Context, pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pgid, err)
	}
	if !haveProc() {
		t := time.NewTimer(50 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return WaitState(ctx, pgid, time.Millisecond, func(int) error { return stopped(pgid) })
}

// Resume continues process group pgid with SIGCONT. Its timers that
// expired during the pause fire at once.
func Resume(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %d: %w", pgid, err)
	}
	return nil
}

// WaitState calls check(pid) every interval until it returns nil, and
// fails with its last error when ctx ends first: a change of a process's
// state is told to nobody but its parent's wait.
func WaitState(ctx context.Context, pid int, interval time.Duration, check func(pid int) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := check(pid)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}
