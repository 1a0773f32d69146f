package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/distlock/distlock"
)

// semLocker is an in-process distlock.Locker: a one-slot channel semaphore
// handing out Leases made with NewLease. It stands in for a backend.
type semLocker struct {
	name    string
	sem     chan struct{}
	lockErr error // if set, Lock fails with it

	mu          sync.Mutex
	seq         int64
	lose        func(error)       // lose func of the newest lease
	releases    int               // release calls
	releaseCtx  []context.Context // contexts release was called with
	releaseErr0 []error           // their Err() at the time of the call
	releaseErr  error
}

func newSemLocker(name string) *semLocker {
	return &semLocker{name: name, sem: make(chan struct{}, 1)}
}

func (s *semLocker) lease() *distlock.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	l, lose := distlock.NewLease("", distlock.Token{Name: s.name, Seq: s.seq, Owner: 1}, func(ctx context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.releases++
		s.releaseCtx = append(s.releaseCtx, ctx)
		s.releaseErr0 = append(s.releaseErr0, ctx.Err())
		<-s.sem
		return s.releaseErr
	}, nil)
	s.lose = lose
	return l
}

func (s *semLocker) Lock(ctx context.Context) (*distlock.Lease, error) {
	if s.lockErr != nil {
		return nil, s.lockErr
	}
	select {
	case s.sem <- struct{}{}:
		return s.lease(), nil
	case <-ctx.Done():
		return nil, &distlock.LockError{Name: s.name, Op: "lock", Err: context.Cause(ctx)}
	}
}

func (s *semLocker) TryLock(ctx context.Context) (*distlock.Lease, error) {
	select {
	case s.sem <- struct{}{}:
		return s.lease(), nil
	default:
		return nil, &distlock.LockError{Name: s.name, Op: "trylock", Err: distlock.ErrLocked}
	}
}

func (s *semLocker) loseNow(reason error) {
	s.mu.Lock()
	lose := s.lose
	s.mu.Unlock()
	lose(fmt.Errorf("%w: %w", distlock.ErrLost, reason))
}

func (s *semLocker) stats() (releases int, ctxs []context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releases, s.releaseCtx
}

func (s *semLocker) releaseCtxErrs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releaseErr0
}

var _ distlock.Locker = (*semLocker)(nil)

func TestDoRunsUnderLock(t *testing.T) {
	lk := newSemLocker("jobs/nightly")
	ctx := context.Background()
	for want := int64(1); want <= 3; want++ {
		var fnCtx context.Context
		err := distlock.Do(ctx, lk, func(ctx context.Context, tk distlock.Token) error {
			fnCtx = ctx
			if tk != (distlock.Token{Name: "jobs/nightly", Seq: want, Owner: 1}) {
				t.Errorf("fn got token %v, want jobs/nightly@%d.1", tk, want)
			}
			if ctx.Err() != nil {
				t.Errorf("fn's ctx done on entry: %v", context.Cause(ctx))
			}
			// The lock is held while fn runs.
			if l, err := lk.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
				t.Errorf("TryLock inside fn = %v, %v; want ErrLocked", l, err)
			}
			if n, _ := lk.stats(); n != int(want-1) {
				t.Errorf("released %d times before fn returned", n)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Do = %v", err)
		}
		if n, _ := lk.stats(); n != int(want) {
			t.Fatalf("after Do #%d: %d releases, want %d", want, n, want)
		}
		if fnCtx.Err() == nil {
			t.Error("fn's ctx still live after Do returned")
		}
	}
	// Released: the lock is free again.
	l, err := lk.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Do = %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDoReturnsFnError(t *testing.T) {
	lk := newSemLocker("a")
	fnErr := errors.New("fn failed")
	err := distlock.Do(context.Background(), lk, func(context.Context, distlock.Token) error { return fnErr })
	if !errors.Is(err, fnErr) {
		t.Fatalf("Do = %v, want %v", err, fnErr)
	}
	if errors.Is(err, distlock.ErrLost) {
		t.Errorf("Do = %v, matches ErrLost", err)
	}
	if n, _ := lk.stats(); n != 1 {
		t.Errorf("%d releases, want 1", n)
	}
}

func TestDoJoinsReleaseError(t *testing.T) {
	lk := newSemLocker("a")
	lk.releaseErr = errors.New("delete failed")
	fnErr := errors.New("fn failed")
	err := distlock.Do(context.Background(), lk, func(context.Context, distlock.Token) error { return fnErr })
	if !errors.Is(err, fnErr) || !errors.Is(err, lk.releaseErr) {
		t.Fatalf("Do = %v, want both %v and %v", err, fnErr, lk.releaseErr)
	}
}

func TestDoLockError(t *testing.T) {
	lk := newSemLocker("a")
	lk.lockErr = &distlock.LockError{Name: "a", Op: "lock", Err: distlock.ErrSessionClosed}
	called := false
	err := distlock.Do(context.Background(), lk, func(context.Context, distlock.Token) error {
		called = true
		return nil
	})
	if err != lk.lockErr {
		t.Errorf("Do = %v, want Lock's error %v", err, lk.lockErr)
	}
	if called {
		t.Error("fn called although Lock failed")
	}
	if n, _ := lk.stats(); n != 0 {
		t.Errorf("%d releases, want 0", n)
	}

	// Lock giving up on a cancelled context, too.
	lk = newSemLocker("b")
	lk.sem <- struct{}{} // held by someone else
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = distlock.Do(ctx, lk, func(context.Context, distlock.Token) error {
		t.Error("fn called although Lock failed")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
}

func TestDoLostWhileRunning(t *testing.T) {
	for _, fnReturnsErr := range []bool{false, true} {
		t.Run(fmt.Sprintf("fnErr=%v", fnReturnsErr), func(t *testing.T) {
			lk := newSemLocker("ledger")
			running := make(chan struct{})
			lost := make(chan struct{})
			go func() {
				<-running
				lk.loseNow(distlock.ErrSessionExpired)
				close(lost)
			}()
			fnErr := errors.New("stopped")
			err := distlock.Do(context.Background(), lk, func(ctx context.Context, _ distlock.Token) error {
				close(running)
				<-ctx.Done()
				cause := context.Cause(ctx)
				if !errors.Is(cause, distlock.ErrLost) || !errors.Is(cause, distlock.ErrSessionExpired) {
					t.Errorf("fn's ctx cause = %v, want ErrLost and ErrSessionExpired", cause)
				}
				var le *distlock.LockError
				if !errors.As(cause, &le) || le.Op != "hold" || le.Name != "ledger" {
					t.Errorf("fn's ctx cause = %#v, want *LockError{ledger, hold}", cause)
				}
				if !errors.Is(ctx.Err(), context.Canceled) {
					t.Errorf("fn's ctx.Err() = %v", ctx.Err())
				}
				if fnReturnsErr {
					return fnErr
				}
				return nil // pretend the work completed
			})
			<-lost
			if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
				t.Errorf("Do = %v, want ErrLost and ErrSessionExpired", err)
			}
			if fnReturnsErr && !errors.Is(err, fnErr) {
				t.Errorf("Do = %v, want fn's error too", err)
			}
			if n, _ := lk.stats(); n != 1 {
				t.Errorf("%d releases, want 1 (the lost entry's leftovers are still removed)", n)
			}
		})
	}
}

func TestDoCallerCancel(t *testing.T) {
	lk := newSemLocker("a")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("shutting down")
	running := make(chan struct{})
	go func() {
		<-running
		cancel(stop)
	}()
	err := distlock.Do(ctx, lk, func(ctx context.Context, _ distlock.Token) error {
		close(running)
		<-ctx.Done()
		if cause := context.Cause(ctx); cause != stop {
			t.Errorf("fn's ctx cause = %v, want %v", cause, stop)
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
	if errors.Is(err, distlock.ErrLost) {
		t.Errorf("Do = %v, matches ErrLost though the lock was not lost", err)
	}
	n, ctxs := lk.stats()
	if n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
	// The release still runs, on a context the caller's cancellation does
	// not reach, and bounded in time.
	if err := lk.releaseCtxErrs()[0]; err != nil {
		t.Errorf("release ran with a done context: %v", err)
	}
	if _, ok := ctxs[0].Deadline(); !ok {
		t.Error("release ran without a deadline")
	}
}

func TestDoLeaseHandsTheLease(t *testing.T) {
	lk := newSemLocker("jobs/weekly")
	var got *distlock.Lease
	err := distlock.DoLease(context.Background(), lk, func(ctx context.Context, l *distlock.Lease) error {
		got = l
		if l.Err() != nil {
			t.Errorf("fn's Lease ended on entry: %v", l.Err())
		}
		if ts := l.Tokens(); len(ts) != 1 || ts[0] != l.Token() || l.Token().Name != "jobs/weekly" {
			t.Errorf("fn's Lease: Token %v, Tokens %v", l.Token(), ts)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("DoLease = %v", err)
	}
	if !errors.Is(got.Err(), distlock.ErrReleased) {
		t.Fatalf("the Lease after DoLease: Err %v, want ErrReleased", got.Err())
	}
	if n, _ := lk.stats(); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
}
