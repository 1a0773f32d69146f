package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// releaseRecorder is a release function that counts its calls and records
// the context it was given.
type releaseRecorder struct {
	calls atomic.Int32
	err   error // returned by every call
	mu    sync.Mutex
	ctx   context.Context
}

func (r *releaseRecorder) release(ctx context.Context) error {
	r.calls.Add(1)
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	return r.err
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var tok = distlock.Token{Name: "reports/daily", Seq: 42, Owner: 0x694d7f0c8a1b2c3d}

func TestLeaseHeld(t *testing.T) {
	var r releaseRecorder
	l, _ := distlock.NewLease("", tok, r.release, nil)
	if l.Token() != tok {
		t.Errorf("Token() = %v, want %v", l.Token(), tok)
	}
	if err := l.Err(); err != nil {
		t.Errorf("Err() = %v while held", err)
	}
	if isClosed(l.Done()) {
		t.Error("Done() closed while held")
	}
	if l.Context().Err() != nil || context.Cause(l.Context()) != nil {
		t.Errorf("Context() done while held: %v", context.Cause(l.Context()))
	}
	if l.Context().Done() != l.Done() {
		t.Error("Done() is not Context().Done()")
	}
	if n := r.calls.Load(); n != 0 {
		t.Errorf("release called %d times before Unlock", n)
	}
}

func checkLost(t *testing.T, err error, reason error) {
	t.Helper()
	if !errors.Is(err, distlock.ErrLost) {
		t.Errorf("err = %v, does not match ErrLost", err)
	}
	if !errors.Is(err, reason) {
		t.Errorf("err = %v, does not match %v", err, reason)
	}
	if errors.Is(err, distlock.ErrReleased) {
		t.Errorf("err = %v, matches ErrReleased", err)
	}
	var le *distlock.LockError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, not a *LockError", err)
	}
	if le.Name != tok.Name || le.Op != "hold" {
		t.Errorf("LockError{Name: %q, Op: %q}, want {%q, %q}", le.Name, le.Op, tok.Name, "hold")
	}
}

func TestLeaseLose(t *testing.T) {
	var r releaseRecorder
	l, lose := distlock.NewLease("", tok, r.release, nil)
	lose(lost(distlock.ErrSessionExpired))

	select {
	case <-l.Done():
	default:
		t.Fatal("Done() not closed after lose")
	}
	err := l.Err()
	checkLost(t, err, distlock.ErrSessionExpired)
	if cause := context.Cause(l.Context()); cause != err {
		t.Errorf("context.Cause(Context()) = %v, want Err() = %v", cause, err)
	}
	if !errors.Is(l.Context().Err(), context.Canceled) {
		t.Errorf("Context().Err() = %v, want context.Canceled", l.Context().Err())
	}
	if n := r.calls.Load(); n != 0 {
		t.Errorf("lose called release %d times", n)
	}

	// A second loss does not replace the first reason.
	lose(lost(distlock.ErrSessionClosed))
	if got := l.Err(); got != err || errors.Is(got, distlock.ErrSessionClosed) {
		t.Errorf("Err() after second lose = %v, want %v", got, err)
	}
}

func TestLeaseUnlockAfterLoss(t *testing.T) {
	var r releaseRecorder
	l, lose := distlock.NewLease("", tok, r.release, nil)
	lose(lost(distlock.ErrSessionExpired))
	lost := l.Err()

	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	err := l.Unlock(ctx)
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("release called %d times, want 1", n)
	}
	if r.ctx.Value(key{}) != "v" {
		t.Error("release did not get Unlock's context")
	}
	if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
		t.Errorf("Unlock after loss = %v, want ErrLost and ErrSessionExpired", err)
	}
	if errors.Is(err, distlock.ErrReleased) {
		t.Errorf("Unlock after loss = %v, matches ErrReleased", err)
	}
	// Unlock does not rewrite why the lease ended.
	if got := l.Err(); got != lost {
		t.Errorf("Err() after Unlock = %v, want the loss %v", got, lost)
	}

	err = l.Unlock(context.Background())
	if !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("second Unlock = %v, want ErrReleased", err)
	}
	var le *distlock.LockError
	if !errors.As(err, &le) || le.Op != "unlock" || le.Name != tok.Name {
		t.Errorf("second Unlock = %#v, want *LockError{Name: %q, Op: unlock}", err, tok.Name)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("release called %d times after second Unlock, want 1", n)
	}
}

func TestLeaseUnlockHeld(t *testing.T) {
	var r releaseRecorder
	l, lose := distlock.NewLease("", tok, r.release, nil)
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock = %v", err)
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("release called %d times, want 1", n)
	}
	if !isClosed(l.Done()) {
		t.Fatal("Done() not closed after Unlock")
	}
	err := l.Err()
	if !errors.Is(err, distlock.ErrReleased) || errors.Is(err, distlock.ErrLost) {
		t.Errorf("Err() after Unlock = %v, want ErrReleased and not ErrLost", err)
	}
	if cause := context.Cause(l.Context()); cause != err {
		t.Errorf("context.Cause(Context()) = %v, want Err() = %v", cause, err)
	}

	// A loss reported after Unlock changes nothing.
	lose(lost(distlock.ErrSessionExpired))
	if got := l.Err(); got != err {
		t.Errorf("Err() after lose following Unlock = %v, want %v", got, err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, distlock.ErrReleased) || errors.Is(err, distlock.ErrLost) {
		t.Errorf("second Unlock = %v, want ErrReleased only", err)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("release called %d times, want 1", n)
	}
}

func TestLeaseUnlockReleaseError(t *testing.T) {
	storeErr := errors.New("store unavailable")
	r := releaseRecorder{err: storeErr}
	l, _ := distlock.NewLease("", tok, r.release, nil)
	err := l.Unlock(context.Background())
	if !errors.Is(err, storeErr) {
		t.Fatalf("Unlock = %v, want %v", err, storeErr)
	}
	var le *distlock.LockError
	if !errors.As(err, &le) || le.Op != "unlock" || le.Name != tok.Name {
		t.Errorf("Unlock = %#v, want *LockError{Name: %q, Op: unlock}", err, tok.Name)
	}
	if errors.Is(err, distlock.ErrLost) {
		t.Errorf("Unlock = %v, matches ErrLost", err)
	}
}

func TestLeaseConcurrentUnlock(t *testing.T) {
	const n = 10
	var r releaseRecorder
	l, lose := distlock.NewLease("", tok, r.release, nil)

	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			errs <- l.Unlock(context.Background())
		})
	}
	// Readers and a late loss race with the unlocks.
	wg.Go(func() {
		<-start
		_ = l.Err()
		_ = l.Token()
		<-l.Done()
		lose(lost(distlock.ErrSessionExpired))
	})
	close(start)
	wg.Wait()
	close(errs)

	var ok, released int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, distlock.ErrReleased):
			released++
		default:
			t.Errorf("Unlock = %v", err)
		}
	}
	if ok != 1 || released != n-1 {
		t.Errorf("%d Unlocks succeeded and %d got ErrReleased, want 1 and %d", ok, released, n-1)
	}
	if c := r.calls.Load(); c != 1 {
		t.Errorf("release called %d times, want 1", c)
	}
	if err := l.Err(); !errors.Is(err, distlock.ErrReleased) || errors.Is(err, distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrReleased", err)
	}
}

// lost is what the engine passes a Lease's lose: the reason, as a loss.
func lost(reason error) error { return fmt.Errorf("%w: %w", distlock.ErrLost, reason) }

// A reason matching ErrReleased is the holder's own end before its release
// is sent (an election's handoff): Done closes, Err says released and not
// lost, Deadline is zero, and the release is still Unlock's to run, once.
func TestLeaseEndedByHolder(t *testing.T) {
	var r releaseRecorder
	l, lose := distlock.NewLease("etcd", tok, r.release, func() time.Time { return time.Now().Add(time.Hour) })
	if l.Deadline().IsZero() {
		t.Fatal("Deadline() zero while held")
	}
	ended := &distlock.LockError{Backend: "etcd", Name: tok.Name, Op: distlock.OpHandOff, Err: fmt.Errorf("%w: handing over", distlock.ErrReleased)}
	lose(ended)
	if !isClosed(l.Done()) {
		t.Fatal("Done() open after the holder ended the hold")
	}
	if err := l.Err(); err != ended || errors.Is(err, distlock.ErrLost) {
		t.Errorf("Err() = %v, want the holder's end %v as it is, not a loss", err, ended)
	}
	if d := l.Deadline(); !d.IsZero() {
		t.Errorf("Deadline() = %v after the end, want the zero Time", d)
	}
	if n := r.calls.Load(); n != 0 {
		t.Fatalf("release ran %d times before Unlock", n)
	}
	// A loss reported after the end is still a loss: Err says so.
	lose(fmt.Errorf("%w: entry deleted", distlock.ErrLost))
	if err := l.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Errorf("Err() = %v after a later loss, want ErrLost", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, distlock.ErrLost) {
		t.Errorf("Unlock() = %v, want the loss", err)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("release ran %d times, want 1", n)
	}
}

// TestLeaseLockDelay: a Lease reports the lock-delay its acquisition
// served, 0 when made without one; a multi-lock's Lease too.
func TestLeaseLockDelay(t *testing.T) {
	tok := distlock.Token{Name: "mail", Seq: 7, Owner: 1}
	l, _ := distlock.NewLease("", tok, func(context.Context) error { return nil }, nil)
	if d := l.LockDelay(); d != 0 {
		t.Fatalf("LockDelay() = %v without the option, want 0", d)
	}
	l, _ = distlock.NewLease("", tok, func(context.Context) error { return nil }, nil, distlock.LeaseLockDelay(3*time.Second))
	if d := l.LockDelay(); d != 3*time.Second {
		t.Fatalf("LockDelay() = %v, want 3s", d)
	}
	m, _ := distlock.NewMultiLease("", []distlock.Token{tok, {Name: "sms", Seq: 7, Owner: 1}}, func(context.Context) error { return nil }, nil, distlock.LeaseLockDelay(time.Second))
	if d := m.LockDelay(); d != time.Second {
		t.Fatalf("multi-lock LockDelay() = %v, want 1s", d)
	}
	// Still reported once the lock is released: it says how the
	// acquisition went.
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := m.LockDelay(); d != time.Second {
		t.Fatalf("LockDelay() after Unlock = %v, want 1s", d)
	}
}
