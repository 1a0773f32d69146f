package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/zklock"
)

// TestTickTime checks where a Session's idea of the servers' tickTime
// comes from: the server itself when it allows the "conf" four-letter word
// (the harness allows all of them), WithTickTime when given, and the
// deadline's margin follows it.
func TestTickTime(t *testing.T) {
	ens := integration.NewZooKeeper(t, integration.WithSize(1))
	conn, _ := connect(t, ens)

	s, err := zklock.NewSession(testCtx(t), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(testCtx(t))
	if got := s.TickTime(); got != integration.ZooKeeperTickTime {
		t.Errorf("TickTime() asked of the server = %v, want the harness's %v", got, integration.ZooKeeperTickTime)
	}

	given := 3 * time.Second
	s2, err := zklock.NewSession(testCtx(t), conn, zklock.WithTickTime(given))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(testCtx(t))
	if got := s2.TickTime(); got != given {
		t.Errorf("TickTime() with WithTickTime(%v) = %v", given, got)
	}
	// A longer tick means a larger margin: the deadline comes earlier.
	if !s2.Deadline().Before(s.Deadline()) {
		t.Errorf("deadline with a %v tick (%v) is not before the one with %v (%v)", given, s2.Deadline(), s.TickTime(), s.Deadline())
	}

	if _, err := zklock.NewSession(testCtx(t), conn, zklock.WithTickTime(0)); err == nil {
		t.Error("NewSession with WithTickTime(0): no error")
	}
}
