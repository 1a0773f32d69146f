package distlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/distlock/distlock"
)

// memMarks is an in-process distlock.SlotMarks for the root package's own
// logic (the backends' stores are tested against real servers): its
// "fence" refuses a lease that is no longer held.
type memMarks struct {
	name    string
	mu      sync.Mutex
	m       map[string]distlock.SlotMarker
	readErr error
	markErr error
	onMark  func() // called after a marker is written
}

func newMemMarks(name string) *memMarks {
	return &memMarks{name: name, m: map[string]distlock.SlotMarker{}}
}

func (s *memMarks) Name() string { return s.name }

func (s *memMarks) Marker(ctx context.Context, slot string) (*distlock.SlotMarker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	if m, ok := s.m[slot]; ok {
		return &m, nil
	}
	return nil, nil
}

func (s *memMarks) Mark(ctx context.Context, l *distlock.Lease, m distlock.SlotMarker) error {
	s.mu.Lock()
	if err := l.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.markErr != nil {
		s.mu.Unlock()
		return s.markErr
	}
	if prev, ok := s.m[m.Slot]; ok {
		s.mu.Unlock()
		return &distlock.SlotDoneError{Name: s.name, Slot: m.Slot, Marker: prev}
	}
	s.m[m.Slot] = m
	onMark := s.onMark
	s.mu.Unlock()
	if onMark != nil {
		onMark()
	}
	return nil
}

func (s *memMarks) has(slot string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[slot]
	return ok
}

func TestOnceLockFails(t *testing.T) {
	l := newSemLocker("job")
	l.lockErr = &distlock.LockError{Name: "job", Op: distlock.OpLock, Err: distlock.ErrSessionExpired}
	ran, err := distlock.Once(context.Background(), l, newMemMarks("job"), "s1", func(context.Context) error {
		t.Error("fn ran")
		return nil
	})
	var oe *distlock.OnceError
	if ran || !errors.As(err, &oe) || oe.Op != distlock.OpLock || !errors.Is(err, distlock.ErrSessionExpired) {
		t.Fatalf("ran %v, err %v; want a OnceError at OpLock wrapping the cause", ran, err)
	}
}

func TestOnceReadFails(t *testing.T) {
	l, marks := newSemLocker("job"), newMemMarks("job")
	marks.readErr = errors.New("store down")
	ran, err := distlock.Once(context.Background(), l, marks, "s1", func(context.Context) error {
		t.Error("fn ran")
		return nil
	})
	var oe *distlock.OnceError
	if ran || !errors.As(err, &oe) || oe.Op != distlock.OpCheck || !errors.Is(err, marks.readErr) || errors.Is(err, distlock.ErrLost) {
		t.Fatalf("ran %v, err %v; want a OnceError at OpCheck", ran, err)
	}
	if r, _ := l.stats(); r != 1 {
		t.Fatalf("%d releases, want 1", r)
	}
}

// TestOnceMarkFails: fn succeeded, the marker could not be written: the
// error says the slot may run again, and is not a loss.
func TestOnceMarkFails(t *testing.T) {
	l, marks := newSemLocker("job"), newMemMarks("job")
	marks.markErr = errors.New("store down")
	ran, err := distlock.Once(context.Background(), l, marks, "s1", func(context.Context) error { return nil })
	var oe *distlock.OnceError
	if !ran || !errors.As(err, &oe) || oe.Op != distlock.OpMark || !oe.Ran || errors.Is(err, distlock.ErrLost) || !errors.Is(err, marks.markErr) {
		t.Fatalf("ran %v, err %v; want a OnceError that fn ran, at OpMark", ran, err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"job"`) || !strings.Contains(msg, `"s1"`) || !strings.Contains(msg, "may run again") {
		t.Errorf("message %q", msg)
	}
}

// TestOnceMarksAfterCancel: a ctx cancelled while fn ran does not cost the
// marker of a fn that succeeded.
func TestOnceMarksAfterCancel(t *testing.T) {
	l, marks := newSemLocker("job"), newMemMarks("job")
	ctx, cancel := context.WithCancel(context.Background())
	ran, err := distlock.Once(ctx, l, marks, "s1", func(context.Context) error {
		cancel()
		return nil
	})
	if !ran || err != nil || !marks.has("s1") {
		t.Fatalf("ran %v, err %v, marked %v", ran, err, marks.has("s1"))
	}
}

// TestOnceLossAfterMark: a loss after an at-least-once marker is no error
// (the marker's write proved the lock held after fn); a loss while an
// at-most-once fn ran is.
func TestOnceLossAfterMark(t *testing.T) {
	l, marks := newSemLocker("job"), newMemMarks("job")
	marks.onMark = func() { l.loseNow(distlock.ErrSessionExpired) }
	ran, err := distlock.Once(context.Background(), l, marks, "s1", func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("at least once: ran %v, err %v; want no error", ran, err)
	}
	marks.onMark = nil
	ran, err = distlock.Once(context.Background(), l, marks, "s2", func(ctx context.Context) error {
		l.loseNow(distlock.ErrSessionExpired)
		<-ctx.Done()
		return nil
	}, distlock.WithOnceMode(distlock.AtMostOnce))
	if !ran || !errors.Is(err, distlock.ErrLost) || !marks.has("s2") {
		t.Fatalf("at most once: ran %v, err %v, marked %v; want the loss reported", ran, err, marks.has("s2"))
	}
}

// TestOnceSlotLock: Once and OnceHeld take the slot's own lock
// (SlotLockName) as well as the marks' lock, and no other.
func TestOnceSlotLock(t *testing.T) {
	marks := newMemMarks("job")
	ran, err := distlock.Once(context.Background(), newSemLocker(distlock.SlotLockName("job", "s1")), marks, "s1", func(context.Context) error { return nil })
	if !ran || err != nil || !marks.has("s1") {
		t.Fatalf("Once on the slot's lock: ran %v, err %v, marked %v", ran, err, marks.has("s1"))
	}
	var oe *distlock.OnceError
	ran, err = distlock.Once(context.Background(), newSemLocker(distlock.SlotLockName("job", "s1")), marks, "s2", func(context.Context) error { return nil })
	if ran || !errors.As(err, &oe) || oe.Op != distlock.OpValidate {
		t.Fatalf("Once on slot s1's lock for slot s2: ran %v, err %v; want a OnceError at OpValidate", ran, err)
	}
	l := newSemLocker(distlock.SlotLockName("job", "s3"))
	lease := l.lease()
	l.sem <- struct{}{}
	defer lease.Unlock(context.Background())
	if ran, err := distlock.OnceHeld(context.Background(), lease, marks, "s3", func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("OnceHeld with the slot's lock: ran %v, err %v", ran, err)
	}
	if ran, err := distlock.OnceHeld(context.Background(), lease, marks, "s4", func(context.Context) error { return nil }); ran || !errors.As(err, &oe) || oe.Op != distlock.OpValidate {
		t.Fatalf("OnceHeld with slot s3's lock for slot s4: ran %v, err %v", ran, err)
	}
}
