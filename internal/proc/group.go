//go:build unix

package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// GroupRunning returns the pids of the processes of process group pgid
// that have not exited. A process that has exited but whose parent has
// not reaped it yet (a zombie) does no work and is not counted; kill(-pgid,
// 0) would count it, and an orphan's zombie waits for init, which on some
// systems reaps only every few seconds. It reads /proc; where there is
// none it says so.
func GroupRunning(pgid int) ([]int, error) {
	if !haveProc() {
		return nil, fmt.Errorf("proc: no /proc to list process group %d", pgid)
	}
	files, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited since the glob
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 3 {
			continue
		}
		if st := fields[0]; len(st) == 1 && (st[0] == 'Z' || st[0] == 'X') {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err != nil || g != pgid {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// WaitGroupGone waits, at most d, until no process of group pgid runs
// (GroupRunning). No event marks a whole group's end, so it polls, every
// few milliseconds.
func WaitGroupGone(pgid int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		pids, err := GroupRunning(pgid)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still runs after %v: pids %v", pgid, d, pids)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
