package qlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Suspend-safe deadlines.
//
// A session's client-side deadline is a time.Time computed from the send
// time of its last confirmed keepalive, compared with time.Now() and
// waited for with Go's timers: all of them read the monotonic clock, which
// on Linux (CLOCK_MONOTONIC) stops while the system is suspended. The
// servers' clocks do not stop. A holder resumed from a suspend longer than
// its TTL would believe, for up to a TTL, that its deadline lies ahead
// while the store has expired its session and granted its lock to a
// successor. (SIGSTOP is not the problem: the monotonic clock runs on, and
// the first check after SIGCONT finds the deadline passed.)
//
// So a session also reads the boot clock (CLOCK_BOOTTIME), which counts
// the time spent in suspend. The boot clock less the monotonic clock (an
// offset, see readClocks) is constant but for the reading's jitter, and
// grows by the length of every suspend: the kernel's boot clock is the
// monotonic one plus an offset that only a resume moves. The effective
// deadline is the deadline moved earlier by how much the offset has grown
// since the confirmed keepalive's send; State.Deadline returns it, so that
// every check the drivers and the Leases make sees it, and ends the
// session when a suspend has put it past its deadline.
//
// Elsewhere than Linux the boot clock is the monotonic clock itself
// (clock_other.go): no suspend is seen, and the deadline is the monotonic
// one as before.

// clock is the boot clock a session reads beside the monotonic one; tests
// replace it with one they can advance (export_test.go).
type clock interface {
	// boot returns the time since some fixed point, counting the time
	// the system spent suspended.
	boot() time.Duration
}

// monoClock is the monotonic clock as a boot clock: with it, no suspend is
// ever seen.
type monoClock struct{}

// monoStart is the origin of monoClock and of the offsets readClocks
// returns.
var monoStart = time.Now()

func (monoClock) boot() time.Duration { return time.Since(monoStart) }

// sessionClock is the clock NewState gives new sessions: the system's
// boot clock (systemClock), unless a test has set another.
var sessionClock struct {
	sync.Mutex
	c clock
}

func currentClock() clock {
	sessionClock.Lock()
	defer sessionClock.Unlock()
	if sessionClock.c == nil {
		return systemClock
	}
	return sessionClock.c
}

// pairing is how close together readClocks's readings must be for it not
// to read again: a thread preempted between them would otherwise read as
// a (short) suspend.
const pairing = 50 * time.Microsecond

// readClocks reads the monotonic clock (inside now) and the boot clock,
// and returns now, the boot clock's offset (the boot clock less the
// monotonic clock's time since monoStart), and how far off that offset
// may be. The monotonic reading is taken between two boot readings, whose
// midpoint counts, so the offset is off by at most half the time between
// them; readings further apart than pairing (the thread was preempted
// between them, or the system suspended) are taken again, up to three
// times, and the closest pair counts.
func readClocks(c clock) (now time.Time, off, uncertain time.Duration) {
	uncertain = -1
	for range 3 {
		b0 := c.boot()
		n := time.Now()
		b1 := c.boot()
		if u := (b1 - b0) / 2; uncertain < 0 || u < uncertain {
			now, off, uncertain = n, b0+u-n.Sub(monoStart), u
		}
		if uncertain <= pairing/2 {
			break
		}
	}
	return now, off, uncertain
}

// suspendNoise is the least growth of the offset, beyond the readings'
// uncertainty, that counts as a suspend: below it, it is the readings' own
// jitter (see pairing). Every session's margin is many times larger.
const suspendNoise = time.Millisecond

// suspend is a suspend the session has seen: the offset grew by at least
// suspendNoise between two readings.
type suspend struct {
	seen   time.Time     // the reading that saw it, the first after the resume
	before time.Duration // the offset before it
}

// effective returns deadline moved earlier by slept, the suspend since the
// deadline's keepalive was sent, and the cause to end the session with if
// that is what put it past its deadline at now: now is before deadline,
// but not before the effective one. (When the deadline itself has passed,
// the drivers' own timers end the session, with their own cause.)
func effective(deadline time.Time, slept time.Duration, now time.Time) (time.Time, error) {
	if slept <= 0 {
		return deadline, nil
	}
	eff := deadline.Add(-slept)
	if now.Before(eff) || !now.Before(deadline) {
		return eff, nil
	}
	return eff, &SuspendedError{Slept: slept, Past: now.Sub(eff)}
}

// SuspendedError is the cause a session ends with when the system was
// suspended for longer than the session's deadline allowed: the store may
// have expired the session meanwhile. It wraps distlock.ErrSessionExpired.
type SuspendedError struct {
	// Slept is how long the system was suspended since the last confirmed
	// keepalive was sent.
	Slept time.Duration
	// Past is how far past its (effective) deadline the session was when
	// it was checked after the resume.
	Past time.Duration
}

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("%v: the system was suspended for %v, which put the session %v past its client-side deadline",
		distlock.ErrSessionExpired, e.Slept.Round(time.Millisecond), e.Past.Round(time.Millisecond))
}

// Unwrap returns distlock.ErrSessionExpired.
func (e *SuspendedError) Unwrap() error { return distlock.ErrSessionExpired }

// suspendCheck returns how often a session whose first deadline is slack
// away reads the clocks while nothing else wakes it, so that a resume is
// noticed within that time: no goroutine runs during a suspend, and after
// one Go's timers fire by the monotonic clock, so a ticker of this period
// fires within a period of the resume. An eighth of the first slack (a
// tenth of an etcd lease's TTL, slack being the TTL less a fifth), at most
// a second, at least 10 ms. A check is a few vDSO clock reads.
func suspendCheck(slack time.Duration) time.Duration {
	return min(max(slack/8, 10*time.Millisecond), time.Second)
}

// watchSuspend checks the deadline every period until ctx ends (see
// suspendCheck): Deadline ends the session if a suspend has put it past
// its deadline.
func (s *State) watchSuspend(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Deadline()
		}
	}
}

// observe reads the clocks, records a suspend if the offset has grown
// since the last one recorded, and returns the monotonic reading. s.mu is
// held.
func (s *State) observe() time.Time {
	now, off, uncertain := readClocks(s.clk)
	if off-s.off >= suspendNoise+uncertain {
		s.suspends = append(s.suspends, suspend{seen: now, before: s.off})
		s.off = off
	}
	return now
}

// sleptLocked returns how long the system was suspended since the send of
// the keepalive the deadline counts from. s.mu is held.
func (s *State) sleptLocked() time.Duration { return s.off - s.base.off }

// rebase makes the keepalive sent at sent the one the deadline counts
// from. Every suspend seen after sent counts against the new deadline:
// one seen later may have begun before sent (the keepalive was in flight,
// or its answer was read after the resume), and only the readings tell
// suspend from run time. Suspends seen before sent ended before it, and
// are dropped: later keepalives are sent later still. A zero sent (not
// known) counts from the previous keepalive's send, which is earlier.
// s.mu is held.
func (s *State) rebase(sent time.Time) {
	switch {
	case sent.IsZero():
		return
	case sent.Before(s.base.sent):
		// A later deadline from an earlier send (the TTL grew; not seen
		// with either store): every suspend since NewState counts.
		s.base.off = s.off0
		return
	}
	i := 0
	for i < len(s.suspends) && !s.suspends[i].seen.After(sent) {
		i++
	}
	s.base.sent, s.base.off = sent, s.off
	if i < len(s.suspends) {
		s.base.off = s.suspends[i].before
	}
	s.suspends = append(s.suspends[:0], s.suspends[i:]...)
}
