package qlock

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestClock is a boot clock that runs with the monotonic clock until a
// test says the system was suspended (Suspend).
type TestClock struct{ slept atomic.Int64 }

func (c *TestClock) boot() time.Duration {
	return time.Since(monoStart) + time.Duration(c.slept.Load())
}

// Suspend moves the boot clock d on, the monotonic clock staying: to the
// sessions that read c, as if the system had just been suspended for d.
func (c *TestClock) Suspend(d time.Duration) { c.slept.Add(int64(d)) }

// UseTestClock makes the sessions started until t ends read a TestClock,
// which it returns, as their boot clock. Tests that call it do not run in
// parallel with tests that start sessions.
func UseTestClock(t testing.TB) *TestClock {
	c := &TestClock{}
	sessionClock.Lock()
	prev := sessionClock.c
	sessionClock.c = c
	sessionClock.Unlock()
	t.Cleanup(func() {
		sessionClock.Lock()
		sessionClock.c = prev
		sessionClock.Unlock()
	})
	return c
}
