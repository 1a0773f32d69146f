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
