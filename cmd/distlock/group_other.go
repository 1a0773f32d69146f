//go:build !linux

package main

// Outside Linux there is no parent-death signal to close the window
// between fork and exec, so distlock does not guard COMMAND's process
// group: COMMAND is started in a group of its own, as its leader, and a
// distlock that is killed with SIGKILL leaves it running (as
// docs/operations.md says: run distlock under a supervisor that kills the
// whole tree).

import (
	"os/exec"
	"syscall"
)

// guardError is a failure of the process group guard (never, here).
type guardError struct{ err error }

func (e *guardError) Error() string { return e.err.Error() }
func (e *guardError) Unwrap() error { return e.err }

// procGroup is the process group COMMAND was started in.
type procGroup struct{ pgid int }

// release is a no-op: no guard.
func (g *procGroup) release() {}

// startInGroup starts cmd (whose SysProcAttr it sets) in a process group
// of its own.
func startInGroup(cmd *exec.Cmd) (*procGroup, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &procGroup{pgid: cmd.Process.Pid}, nil
}
