//go:build unix

package proc

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestPauseResume stops a real process group and continues it.
func TestPauseResume(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		Resume(pid)
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Pause(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if !haveProc() {
		return
	}
	if st, err := State(pid); err != nil || !IsStopped(st) {
		t.Fatalf("after Pause: state %c, %v", st, err)
	}
	if err := Resume(pid); err != nil {
		t.Fatal(err)
	}
	err := WaitState(ctx, pid, time.Millisecond, func(pid int) error {
		st, err := State(pid)
		if err == nil && IsStopped(st) {
			err = fmt.Errorf("state %c", st)
		}
		return err
	})
	if err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	cmd.Wait()
	if st, err := State(pid); err != nil || st != 0 {
		t.Errorf("after exit: state %c, %v", st, err)
	}
}

// TestGroupRunning: a group's live processes are listed, its zombies are
// not.
func TestGroupRunning(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); len(pids) < 2; {
		var err error
		if pids, err = GroupRunning(pgid); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d: running %v, want 2 processes", pgid, pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Killed but not reaped: the leader is a zombie of ours until Wait,
	// and the background sleep an orphan.
	syscall.Kill(-pgid, syscall.SIGKILL)
	if err := WaitGroupGone(pgid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pgid, 0); err != nil {
		t.Fatalf("the leader should still be an unreaped zombie: %v", err)
	}
	cmd.Wait()
}
