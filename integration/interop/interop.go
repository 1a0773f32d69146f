// Package interop runs the lock clients that distlock shares queues with,
// the real ones, for the interop suite (tests/interop): Apache Curator
// (a Java program compiled from java/Holder.java against Debian's jars),
// kazoo (python/holder.py, run by the system's Python), etcdctl (built
// from the Go module proxy at the etcd version this module requires), and
// in process go-zookeeper's zk.Lock, etcd's concurrency.Mutex and
// Election, the recipes RWMutex and the v3lock and v3election gRPC
// services; and distlock's own locks, behind the same Holder interface so
// that every pair of them runs the same way.
//
// The child programs speak a line protocol: they print "waiting" once
// they have asked for the lock, "held [node]" once it is theirs, read
// "release" on stdin, release, print "released" and exit 0. A line
// "error <text>" reports a failure. etcdctl, which speaks none of it,
// is read by its own output (the key, once held) and released by SIGTERM.
package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrMissing reports that a foreign client is not installed on this
// machine: scripts/interop-deps.sh installs them all.
var ErrMissing = errors.New("interop: client not installed")

// Holder is one client asking for one lock. Start asks and returns once
// the request is out (for a child process: once it said "waiting"),
// Granted closes when the lock is held, Release gives it back and returns
// once it is released. Close ends the holder whatever its state.
type Holder interface {
	// Name says which client and recipe this is, for the report.
	Name() string
	Start(ctx context.Context) error
	Granted() <-chan struct{}
	// GrantedAt is when the grant was seen (the zero Time before), and
	// Err why the holder failed, if it did.
	GrantedAt() time.Time
	Err() error
	Release(ctx context.Context) error
	Close() error
}

// Pausable is a holder in a process of its own, which a test can freeze
// like a long GC pause (SIGSTOP) and wake again (SIGCONT): the Curator,
// kazoo and etcdctl holders.
type Pausable interface {
	Holder
	Pause() error
	Resume() error
}

// Acquire starts h and waits until it holds its lock.
func Acquire(ctx context.Context, h Holder) error {
	if err := h.Start(ctx); err != nil {
		return err
	}
	return WaitGranted(ctx, h)
}

// WaitGranted waits until h holds its lock, or failed.
func WaitGranted(ctx context.Context, h Holder) error {
	select {
	case <-h.Granted():
		return nil
	case <-failed(h):
		return h.Err()
	case <-ctx.Done():
		return fmt.Errorf("interop: %s: not granted: %w", h.Name(), ctx.Err())
	}
}

// failer is implemented by every holder here: its channel closes when
// the holder failed.
type failer interface{ failed() <-chan struct{} }

func failed(h Holder) <-chan struct{} {
	if f, ok := h.(failer); ok {
		return f.failed()
	}
	return nil
}

// state is the grant and failure bookkeeping every holder shares.
type state struct {
	name     string
	mu       sync.Mutex
	granted  chan struct{}
	grantAt  time.Time
	fail     chan struct{}
	err      error
	released chan struct{}
}

func newState(name string) state {
	return state{name: name, granted: make(chan struct{}), fail: make(chan struct{}), released: make(chan struct{})}
}

func (s *state) Name() string             { return s.name }
func (s *state) Granted() <-chan struct{} { return s.granted }
func (s *state) failed() <-chan struct{}  { return s.fail }

func (s *state) GrantedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grantAt
}

func (s *state) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *state) grant(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grantAt.IsZero() {
		s.grantAt = at
		close(s.granted)
	}
}

func (s *state) failWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = fmt.Errorf("interop: %s: %w", s.name, err)
		close(s.fail)
	}
}

func (s *state) markReleased() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.released:
	default:
		close(s.released)
	}
}

// waitReleased waits for markReleased, or a failure.
func (s *state) waitReleased(ctx context.Context) error {
	select {
	case <-s.released:
		return nil
	case <-s.fail:
		return s.Err()
	case <-ctx.Done():
		return fmt.Errorf("interop: %s: release: %w", s.name, ctx.Err())
	}
}
