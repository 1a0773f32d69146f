package interop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procHolder is a child process holding a lock: one of the line-protocol
// programs, or etcdctl (protocol false), which prints the key once held
// and releases on SIGTERM.
type procHolder struct {
	state
	args     []string
	protocol bool

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{}
	once   sync.Once
}

func newProc(name string, protocol bool, args ...string) *procHolder {
	return &procHolder{state: newState(name), args: args, protocol: protocol, exited: make(chan struct{})}
}

// Start runs the program and, for the protocol's programs, waits for its
// "waiting" line: then its request is out, or about to be.
func (p *procHolder) Start(ctx context.Context) error {
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stderr = &lockedWriter{w: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("interop: %s: %w", p.name, err)
	}
	waiting := make(chan struct{})
	if !p.protocol {
		close(waiting)
	}
	go p.read(out, waiting)
	select {
	case <-waiting:
		return nil
	case <-p.fail:
		return p.Err()
	case <-ctx.Done():
		p.Close()
		return fmt.Errorf("interop: %s: no \"waiting\": %w", p.name, ctx.Err())
	}
}

func (p *procHolder) read(out io.Reader, waiting chan struct{}) {
	sc := bufio.NewScanner(out)
	sawWaiting := !p.protocol
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		now := time.Now()
		switch {
		case !p.protocol:
			// etcdctl prints the key, then its value: the first line
			// is the grant.
			if line != "" {
				p.grant(now)
			}
		case line == "waiting":
			if !sawWaiting {
				sawWaiting = true
				close(waiting)
			}
		case line == "held" || strings.HasPrefix(line, "held "):
			p.grant(now)
		case line == "released":
			p.markReleased()
		case strings.HasPrefix(line, "error"):
			p.failWith(errors.New(line))
		}
	}
	err := p.cmd.Wait()
	if !p.protocol && !p.GrantedAt().IsZero() {
		// etcdctl's release is its orderly exit after SIGTERM.
		if err == nil {
			p.markReleased()
		}
	}
	select {
	case <-p.released:
	default:
		p.failWith(fmt.Errorf("exited (%v) before releasing; stderr:\n%s", err, p.stderrText()))
	}
	close(p.exited)
}

func (p *procHolder) stderrText() string {
	w := p.cmd.Stderr.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return s
}

// Release tells the program to release and waits until it has.
func (p *procHolder) Release(ctx context.Context) error {
	if p.protocol {
		if _, err := io.WriteString(p.stdin, "release\n"); err != nil {
			return fmt.Errorf("interop: %s: release: %w", p.name, err)
		}
	} else if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("interop: %s: release: %w", p.name, err)
	}
	if err := p.waitReleased(ctx); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interop: %s: no exit after release: %w", p.name, ctx.Err())
	}
}

// Pause stops the program (SIGSTOP): it holds on, unaware, while its
// session runs out on the server.
func (p *procHolder) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused program (SIGCONT).
func (p *procHolder) Resume() error { return p.signal(syscall.SIGCONT) }

func (p *procHolder) signal(s syscall.Signal) error {
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("interop: %s: not started", p.name)
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		return fmt.Errorf("interop: %s: %v: %w", p.name, s, err)
	}
	return nil
}

// Close kills the program if it still runs.
func (p *procHolder) Close() error {
	p.once.Do(func() {
		if p.cmd == nil || p.cmd.Process == nil {
			return
		}
		p.stdin.Close()
		select {
		case <-p.exited:
			return
		default:
		}
		p.cmd.Process.Kill()
		<-p.exited
	})
	return nil
}

// lockedWriter lets the process's stderr copier and a failure report
// share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
