//go:build linux

package qlock

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// bootClock reads CLOCK_BOOTTIME: the monotonic clock plus the time the
// system spent suspended.
type bootClock struct{}

// bootOffset is the boot clock less monoClock at the last successful read.
var bootOffset atomic.Int64

func (bootClock) boot() time.Duration {
	var ts unix.Timespec
	mono := monoClock{}.boot()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Not expected once systemClock found the clock (the other
		// error is a bad address). Go on from the last reading on the
		// monotonic clock, which sees no suspend, but no false one either.
		return mono + time.Duration(bootOffset.Load())
	}
	b := time.Duration(ts.Nano())
	bootOffset.Store(int64(b - mono))
	return b
}

// systemClock is CLOCK_BOOTTIME, or the monotonic clock (no suspend seen)
// on a kernel without it.
var systemClock = func() clock {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return monoClock{}
	}
	return bootClock{}
}()
