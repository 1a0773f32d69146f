package zkq

import (
	"testing"
	"time"
)

// TestTiming checks the client-side deadline's margin against the rule it
// rests on (see timing): the margin covers the Sync interval, half a tick
// and a fiftieth of the timeout, whatever the tick, and is as small as the
// one-server-down tests allow when the tick is short.
func TestTiming(t *testing.T) {
	cases := []struct {
		timeout, tick      time.Duration
		wantSync, wantMarg time.Duration
	}{
		{6 * time.Second, 200 * time.Millisecond, 300 * time.Millisecond, 750 * time.Millisecond}, // the harness: 7/8
		{10 * time.Second, 2 * time.Second, time.Second, 2200 * time.Millisecond},                 // ZooKeeper's default tick
		{4 * time.Second, 2 * time.Second, 4 * time.Second / 6, 4*time.Second/6 + time.Second + 80*time.Millisecond},
		{40 * time.Second, 2 * time.Second, 2 * time.Second, 5 * time.Second},
	}
	for _, c := range cases {
		sync, margin := timing(c.timeout, c.tick)
		if sync != c.wantSync || margin != c.wantMarg {
			t.Errorf("timing(%v, %v) = %v, %v; want %v, %v", c.timeout, c.tick, sync, margin, c.wantSync, c.wantMarg)
		}
	}
	// ZooKeeper negotiates timeouts from 2 to 20 ticks by default; 300 ms
	// is the shortest a Session takes.
	for timeout := MinTTL; timeout <= 60*time.Second; timeout += 50 * time.Millisecond {
		for tick := 10 * time.Millisecond; tick <= timeout/2; tick += 10 * time.Millisecond {
			sync, margin := timing(timeout, tick)
			if margin < sync+tick/2+timeout/50 {
				t.Fatalf("timing(%v, %v): margin %v does not cover Sync interval %v + half a tick + timeout/50", timeout, tick, margin, sync)
			}
			if margin >= timeout*3/5 || sync <= 0 || sync > timeout/6 {
				t.Fatalf("timing(%v, %v) = %v, %v: deadline too early or Syncs out of bounds", timeout, tick, sync, margin)
			}
		}
	}
}
