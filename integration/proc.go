package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock/internal/proc"
)

// process is one server process of a cluster: started, killed, paused and
// restarted by the harness. Its output goes to a log file next to its data
// so a failed test can show it.
type process struct {
	name string
	log  *slog.Logger
	argv []string
	env  []string
	out  string // log file path

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run exits
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("integration: %s is already running", p.name)
	}
	f, err := os.OpenFile(p.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so signals reach the whole server; and killed
	// with the test process, so an interrupted run leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("integration: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		cmd.Wait()
		f.Close()
		close(done)
	}()
	p.log.Info("integration: started", "node", p.name, "pid", cmd.Process.Pid)
	return nil
}

// pid returns the running process's PID, or 0.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited returns a channel closed when the current run ends (nil if none).
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("integration: %s is not running", p.name)
	}
	p.log.Info("integration: signal", "node", p.name, "signal", sig.String())
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill sends SIGKILL (after SIGCONT, so a paused server dies too) and waits
// until the process is gone.
func (p *process) kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("integration: %s (pid %d) did not exit after SIGKILL", p.name, cmd.Process.Pid)
	}
	p.log.Info("integration: killed", "node", p.name, "pid", cmd.Process.Pid)
	return nil
}

// tail returns the end of the process's log, for error messages.
func (p *process) tail() string {
	b, err := os.ReadFile(p.out)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// poll calls check every interval until it returns nil or ctx ends; the
// harness uses it to wait for a server to answer, which it cannot be told
// about any other way.
func poll(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// waitProcState waits, up to verifyTimeout, until process pid's state
// (see proc.State) satisfies ok (state 0: no such process).
func waitProcState(pid int, ok func(byte) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	return proc.WaitState(ctx, pid, 5*time.Millisecond, func(pid int) error {
		st, err := proc.State(pid)
		if err != nil {
			return err
		}
		if !ok(st) {
			if st == 0 {
				return errors.New("no such process")
			}
			return fmt.Errorf("state %c", st)
		}
		return nil
	})
}
