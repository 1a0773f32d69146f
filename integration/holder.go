package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/proc"
)

// HolderSpec says which lock a Holder takes, and where.
type HolderSpec struct {
	// Backend is the lock service: "etcd" (the default, an etcdlock
	// Mutex) or "zk" (a zklock Mutex).
	Backend string
	// Endpoints are the service's client endpoints: EtcdCluster.Endpoints()
	// for etcd, ZooKeeperEnsemble.Addrs() for zk.
	Endpoints []string
	// Lock is the lock's name.
	Lock string
	// TTL is the etcd session TTL (default etcdlock.MinTTL, 2s), or the
	// ZooKeeper session timeout the holder asks for (default 4s; the
	// servers may negotiate it into their bounds). A holder stopped for
	// longer loses its lock on the server.
	TTL time.Duration
	// Prefix is the key prefix of the locks (default: the backend's).
	Prefix string
	// Permits, when above 0, makes Lock a semaphore of that many permits:
	// the holder takes a permit (its token is the slot's, see
	// distlock.Permit) instead of the Mutex.
	Permits int
	// Election makes Lock an election: the holder campaigns in it, with
	// its pid as its value, and holds while it leads (its token is the
	// term's); Unlock resigns. It excludes Permits.
	Election bool
	// Priority is the candidate's priority in an Election
	// (distlock.WithPriority).
	Priority int
	// Compat is the Mutex's compatibility mode (distlock.WithCompat), so
	// that another client's lock on the same path counts the holder's
	// entry; "" for distlock's own naming.
	Compat distlock.Compat
	// Logger logs the holder's steps, events and stderr (silent if nil).
	Logger *slog.Logger
	// TLS, for an etcd cluster started WithTLS, is its EtcdCluster.TLS:
	// the holder trusts its CA and presents the good client certificate.
	TLS *TLSFiles
	// Wait makes a waiting holder (the lockholder's -waiter): StartHolder
	// returns once the holder's entry is in the lock's queue, acquired
	// or not, and the holder reports its session's client-side deadline,
	// how its Lock (or Campaign) returned, failed included, and its
	// session's end (see Owner, Entry, Deadline, Result, SessionEnded). It
	// excludes Permits.
	Wait bool
}

// Holder is a lock holder in a process of its own (the lockholder command):
// a real process that a test can stop with SIGSTOP, like a long GC pause,
// and continue, to watch what a holder that slept past its TTL believes
// when it wakes up.
type Holder struct {
	spec   HolderSpec
	log    *slog.Logger
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	stderr tail

	acquired chan struct{} // closed by the "acquired" event
	lost     chan struct{} // closed by the "lost" event
	replies  chan struct{} // signalled when a reply is queued
	exited   chan struct{} // closed when the process has exited and been reaped

	mu       sync.Mutex
	token    distlock.Token
	badStart error         // an error event, or a bad token, before "acquired"
	lostErr  string        // the "lost" event's error
	queue    []holderEvent // replies not yet taken by a command
	exitErr  error

	cmdMu sync.Mutex // one command at a time
	owed  int        // replies still to come for abandoned commands; cmdMu
	inMu  sync.Mutex // one line at a time to stdin

	writeMu sync.Mutex
	writeID int64                  // the last write's id; writeMu
	writes  map[int64]*HolderWrite // writes in flight; writeMu

	closeOnce sync.Once
	closeErr  error

	wait *waitState // spec.Wait's reports (holder_wait.go)
}

// holderCloseTimeout is how long Close waits for the holder to exit on its
// own (unlock, close its session) before it kills it.
const holderCloseTimeout = 15 * time.Second

// NewHolder starts a holder for a test, fails the test if it cannot
// acquire within a minute, and closes it when the test ends.
func NewHolder(t testing.TB, spec HolderSpec) *Holder {
	t.Helper()
	if spec.Logger == nil {
		spec.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := StartHolder(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// StartHolder builds and starts the lockholder command and waits until it
// holds the lock. It fails if the process reports an error or exits first,
// or when ctx ends (the process is then closed). The process outlives ctx:
// Close ends it.
func StartHolder(ctx context.Context, spec HolderSpec) (*Holder, error) {
	if spec.Backend == "" {
		spec.Backend = "etcd"
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	bin, err := buildBinary(ctx, "cmd/internal/lockholder")
	if err != nil {
		return nil, err
	}
	args := []string{"-backend", spec.Backend, "-endpoints", strings.Join(spec.Endpoints, ","), "-lock", spec.Lock}
	if spec.TTL > 0 {
		args = append(args, "-ttl", spec.TTL.String())
	}
	if spec.Permits > 0 {
		args = append(args, "-permits", strconv.Itoa(spec.Permits))
	}
	if spec.Election {
		args = append(args, "-election")
	}
	if spec.Priority != 0 {
		args = append(args, "-priority", strconv.Itoa(spec.Priority))
	}
	if spec.Wait {
		args = append(args, "-waiter")
	}
	if spec.Compat != "" {
		args = append(args, "-compat", string(spec.Compat))
	}
	if spec.Prefix != "" {
		args = append(args, "-prefix", spec.Prefix)
	}
	if spec.TLS != nil {
		args = append(args, "-cacert", spec.TLS.CA, "-cert", spec.TLS.Cert, "-key", spec.TLS.Key)
	}
	cmd := exec.Command(bin, args...)
	// Its own process group, so that Pause stops every thread; and killed
	// with the test process, so that an interrupted run leaves no holder.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("integration: start lock holder: %w", err)
	}
	h := &Holder{
		spec:     spec,
		cmd:      cmd,
		pid:      cmd.Process.Pid,
		stdin:    stdin,
		acquired: make(chan struct{}),
		lost:     make(chan struct{}),
		replies:  make(chan struct{}, 1),
		exited:   make(chan struct{}),
		writes:   map[int64]*HolderWrite{},
		wait:     newWaitState(),
	}
	h.log = spec.Logger.With("holder", h.pid, "lock", spec.Lock)
	h.log.Info("integration: lock holder started", "argv", strings.Join(append([]string{filepath.Base(bin)}, args...), " "))
	go h.read(stdout, stderr)

	ready, failed := h.acquired, (<-chan struct{})(nil)
	if spec.Wait {
		ready, failed = h.wait.enqueued, h.wait.failed
	}
	select {
	case <-failed:
		h.Close()
		return nil, h.errorf("start: Lock failed before the entry was seen in the queue: %s", h.wait.result().Err)
	case <-ready:
		h.mu.Lock()
		err := h.badStart
		h.mu.Unlock()
		if err == nil {
			return h, nil
		}
		h.Close()
		return nil, h.errorf("start: %w", err)
	case <-h.exited:
		h.mu.Lock()
		err := errors.Join(h.badStart, h.exitErr)
		h.mu.Unlock()
		return nil, h.errorf("start: exited before acquiring: %w", err)
	case <-ctx.Done():
		h.Close()
		return nil, h.errorf("start: not acquired: %w", context.Cause(ctx))
	}
}

// errorf returns an error naming the holder, with the end of its stderr.
func (h *Holder) errorf(format string, args ...any) error {
	err := fmt.Errorf("integration: lock holder %d (%s): "+format, append([]any{h.pid, h.spec.Lock}, args...)...)
	if s := h.stderr.String(); s != "" {
		err = fmt.Errorf("%w\n--- holder stderr:\n%s", err, s)
	}
	return err
}

// Token returns the fencing token of the holder's acquisition.
func (h *Holder) Token() distlock.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.token
}

// PID returns the holder's process ID (also its process group's).
func (h *Holder) PID() int { return h.pid }

// Pause stops the holder with SIGSTOP, like a long GC pause: it keeps its
// connections but runs no code, timers included. Pause returns once every
// thread of the process is stopped.
func (h *Holder) Pause() error {
	if err := h.running("SIGSTOP"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := proc.Pause(ctx, h.pid); err != nil {
		return h.errorf("pause: %w", err)
	}
	return nil
}

// Resume continues a paused holder with SIGCONT. Its timers that expired
// during the pause fire at once.
func (h *Holder) Resume() error {
	if err := h.running("SIGCONT"); err != nil {
		return err
	}
	if err := proc.Resume(h.pid); err != nil {
		return h.errorf("resume: %w", err)
	}
	return nil
}

// running returns an error when the holder has exited, and logs sig.
func (h *Holder) running(sig string) error {
	select {
	case <-h.exited:
		return h.errorf("%s: the process has exited", sig)
	default:
	}
	h.log.Info("integration: signal lock holder", "signal", sig)
	return nil
}

// Close ends the holder: it continues it if paused, closes its stdin (the
// holder then unlocks, best effort, closes its session and exits), and
// kills it if it has not exited within holderCloseTimeout. It returns an
// error only if the holder had to be killed or would not die. Calling
// Close again returns the same result.
func (h *Holder) Close() error {
	h.closeOnce.Do(func() { h.closeErr = h.close() })
	return h.closeErr
}

func (h *Holder) close() error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	proc.Resume(h.pid) // a paused holder could not exit
	h.stdin.Close()
	timer := time.NewTimer(holderCloseTimeout)
	defer timer.Stop()
	select {
	case <-h.exited:
		return nil
	case <-timer.C:
	}
	syscall.Kill(-h.pid, syscall.SIGKILL)
	timer.Reset(30 * time.Second)
	select {
	case <-h.exited:
		return h.errorf("did not exit within %v of its stdin closing; killed", holderCloseTimeout)
	case <-timer.C:
		return h.errorf("did not exit after SIGKILL")
	}
}
