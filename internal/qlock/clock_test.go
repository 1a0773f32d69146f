package qlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestEffective is the effective deadline's arithmetic: the deadline moved
// earlier by the suspend, and a cause to end the session only when the
// suspend is what put it past its deadline.
func TestEffective(t *testing.T) {
	d := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name    string
		slept   time.Duration
		now     time.Time
		want    time.Time
		suspend bool // a *SuspendedError
		past    time.Duration
	}{
		{"no suspend", 0, d.Add(-time.Second), d, false, 0},
		{"no suspend, past the deadline", 0, d.Add(time.Second), d, false, 0},
		{"suspend, still ahead", 2 * time.Second, d.Add(-3 * time.Second), d.Add(-2 * time.Second), false, 0},
		{"suspend puts it past", 2 * time.Second, d.Add(-time.Second), d.Add(-2 * time.Second), true, time.Second},
		{"suspend puts it just there", 2 * time.Second, d.Add(-2 * time.Second), d.Add(-2 * time.Second), true, 0},
		{"past the deadline itself: the driver's", 2 * time.Second, d, d.Add(-2 * time.Second), false, 0},
	} {
		got, err := effective(d, c.slept, c.now)
		if !got.Equal(c.want) {
			t.Errorf("%s: effective deadline %v, want %v", c.name, got.Sub(d), c.want.Sub(d))
		}
		var se *SuspendedError
		switch {
		case c.suspend && !errors.As(err, &se):
			t.Errorf("%s: %v, want a *SuspendedError", c.name, err)
		case c.suspend && (se.Slept != c.slept || se.Past != c.past || !errors.Is(err, distlock.ErrSessionExpired)):
			t.Errorf("%s: %v (slept %v, past %v), want slept %v, past %v, matching ErrSessionExpired", c.name, err, se.Slept, se.Past, c.slept, c.past)
		case !c.suspend && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		}
	}
}

// near reports whether a and b are within the clock readings' jitter of
// each other (far less than the seconds the tests tell apart).
func near(a, b time.Time) bool { return a.Sub(b).Abs() < 100*time.Millisecond }

// newTestState returns a State on a TestClock whose deadline is 5 s away,
// ended when the test ends.
func newTestState(t *testing.T) (*State, *TestClock) {
	clk := UseTestClock(t)
	s := NewState(Backend{Name: "etcd", Pkg: "etcdlock"}, slog.New(slog.DiscardHandler), "", 0, time.Now().Add(5*time.Second), Observe{})
	t.Cleanup(func() { s.Close(context.Background(), func(context.Context) error { return nil }) })
	return s, clk
}

// TestStateSuspend: a State's Deadline is moved earlier by a suspend, and
// ends the session once the suspend puts it past the deadline.
func TestStateSuspend(t *testing.T) {
	s, clk := newTestState(t)
	sent := time.Now()
	s.ExtendFrom(sent, sent.Add(10*time.Second))
	if d := s.Deadline(); !near(d, sent.Add(10*time.Second)) {
		t.Fatalf("Deadline %v after the send, want 10s", d.Sub(sent))
	}
	clk.Suspend(3 * time.Second)
	if d := s.Deadline(); !near(d, sent.Add(7*time.Second)) {
		t.Fatalf("Deadline %v after the send after a 3s suspend, want 7s", d.Sub(sent))
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session ended by a suspend within its deadline: %v", err)
	}
	clk.Suspend(8 * time.Second)
	s.Deadline()
	var se *SuspendedError
	if err := s.Err(); !errors.Is(err, distlock.ErrSessionExpired) || !errors.As(err, &se) {
		t.Fatalf("Err %v after an 11s suspend with 10s to go, want a *SuspendedError matching ErrSessionExpired", err)
	}
	if se.Slept < 11*time.Second-100*time.Millisecond || se.Slept > 11*time.Second+100*time.Millisecond {
		t.Errorf("Slept %v, want 11s", se.Slept)
	}
}

// TestExtendFromSuspend: a suspend counts against a keepalive's deadline
// when it was seen after the keepalive's send (it may have begun while the
// keepalive was in flight), and not when it was over before the send.
func TestExtendFromSuspend(t *testing.T) {
	s, clk := newTestState(t)

	// In flight: sent, then the system slept, then the answer.
	sent := time.Now()
	clk.Suspend(2 * time.Second)
	s.ExtendFrom(sent, sent.Add(10*time.Second))
	if d := s.Deadline(); !near(d, sent.Add(8*time.Second)) {
		t.Fatalf("Deadline %v after a keepalive's send that a 2s suspend followed, want 8s", d.Sub(sent))
	}

	// Over before the send: seen (by Deadline), then the next keepalive.
	clk.Suspend(time.Second)
	s.Deadline()
	sent = time.Now()
	s.ExtendFrom(sent, sent.Add(10*time.Second))
	if d := s.Deadline(); !near(d, sent.Add(10*time.Second)) {
		t.Fatalf("Deadline %v after a keepalive sent after a suspend, want 10s", d.Sub(sent))
	}

	// Send time not known (Extend): counted from the previous send.
	clk.Suspend(time.Second)
	s.Deadline()
	d := time.Now().Add(10 * time.Second)
	s.Extend(d)
	if got := s.Deadline(); !near(got, d.Add(-time.Second)) {
		t.Fatalf("Deadline %v after Extend past a 1s suspend, want 1s before the extended one", got.Sub(d))
	}

	// An answer that comes after a suspend past the deadline does not
	// revive the session.
	sent = time.Now()
	clk.Suspend(time.Minute)
	s.ExtendFrom(sent, sent.Add(10*time.Second))
	if err := s.Err(); !errors.As(err, new(*SuspendedError)) {
		t.Fatalf("Err %v after a keepalive answered past a suspend longer than the deadline, want a *SuspendedError", err)
	}
}

func TestSuspendCheck(t *testing.T) {
	for slack, want := range map[time.Duration]time.Duration{
		8 * time.Second:         time.Second,
		24 * time.Second:        time.Second,
		1600 * time.Millisecond: 200 * time.Millisecond,
		10 * time.Millisecond:   10 * time.Millisecond,
	} {
		if got := suspendCheck(slack); got != want {
			t.Errorf("suspendCheck(%v) = %v, want %v", slack, got, want)
		}
	}
}

// TestNoFalseSuspend: on the system's own clocks (CLOCK_BOOTTIME on
// Linux), many readings in a row see no suspend: the offset between the
// boot clock and Go's monotonic clock stands still but for jitter.
func TestNoFalseSuspend(t *testing.T) {
	d := time.Now().Add(time.Hour)
	s := NewState(Backend{Name: "etcd", Pkg: "etcdlock"}, slog.New(slog.DiscardHandler), "", 0, d, Observe{})
	t.Cleanup(func() { s.Close(context.Background(), func(context.Context) error { return nil }) })
	for range 10000 {
		if got := s.Deadline(); !got.Equal(d) {
			t.Fatalf("Deadline moved by %v without a suspend", d.Sub(got))
		}
	}
	s.mu.Lock()
	seen := len(s.suspends)
	s.mu.Unlock()
	if s.Err() != nil || seen != 0 {
		t.Fatalf("%d suspends seen without one: %v", seen, s.Err())
	}
}
