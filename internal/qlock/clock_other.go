//go:build !linux

package qlock

// systemClock: elsewhere than Linux a session reads no boot clock, and sees
// no suspend (its deadline is on the monotonic clock alone). On macOS and
// the BSDs Go's monotonic clock may stop in sleep too; their clocks that
// count sleep differ in name and meaning, and are not read here.
var systemClock clock = monoClock{}
