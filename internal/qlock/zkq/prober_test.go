package zkq

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/testserve"
	"github.com/go-zookeeper/zk"
)

// TestLivenessSharedPerConn opens many Sessions on one connection and
// checks that they share one prober: every Session's deadline moves on
// while the connection sends about as many Syncs as one Session would, and
// the prober goes when the last Session closes.
func TestLivenessSharedPerConn(t *testing.T) {
	ens := testserve.NewZooKeeper(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	const n = 50
	cfg := Config{Options: qlock.Options{Prefix: "/distlock"}.Defaults(), Tick: testserve.ZooKeeperTickTime, ACL: zk.WorldACL(zk.PermAll)}
	sessions := make([]*Session, n)
	started := make([]time.Time, n)
	for i := range sessions {
		s, err := NewSession(ctx, conn, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i], started[i] = s, s.Deadline()
	}
	probers.Lock()
	p := probers.m[conn]
	probers.Unlock()
	if p == nil {
		t.Fatal("no prober for the connection")
	}
	p.mu.Lock()
	subs := len(p.subs)
	p.mu.Unlock()
	if subs != n {
		t.Fatalf("the prober has %d subscribers, want %d", subs, n)
	}

	// Wait until every Session's deadline has moved on by three sync
	// intervals: each of them was confirmed at least three times.
	interval := sessions[0].sync
	before := p.sent.Load()
	for i, s := range sessions {
		for s.Deadline().Before(started[i].Add(3 * interval)) {
			if err := s.Err(); err != nil {
				t.Fatalf("session %d ended: %v", i, err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("session %d's deadline did not move on: %v", i, ctx.Err())
			case <-time.After(pollInterval):
			}
		}
	}
	// One Session alone would have needed three Syncs; fifty of them,
	// each with its own, a hundred and fifty. Sessions made a moment apart
	// may ask apart at first, until the shared answers align them.
	if sent := p.sent.Load() - before; sent > 3*10 {
		t.Errorf("%d Syncs sent for %d sessions over three intervals, want them shared (≤ 30)", sent, n)
	}
	t.Logf("%d Syncs for %d sessions over three intervals", p.sent.Load()-before, n)

	for _, s := range sessions {
		u := s.User()
		if err := u.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	probers.Lock()
	_, left := probers.m[conn]
	probers.Unlock()
	if left {
		t.Error("the prober outlived the connection's last Session")
	}
}

// TestClosedConnNoSpin closes the connection under a live Session. Every
// Sync then fails at once (go-zookeeper answers ErrConnectionClosed
// without sending); the Session must keep pacing its Syncs instead of
// sending the next one on the failure's own wake-up, which spun a core
// until the client-side deadline. The Session still ends by that
// deadline, since nothing can confirm it any more.
func TestClosedConnNoSpin(t *testing.T) {
	ens := testserve.NewZooKeeper(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _, err := ens.ConnectTimeout(ctx, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Options: qlock.Options{Prefix: "/distlock"}.Defaults(), Tick: testserve.ZooKeeperTickTime, ACL: zk.WorldACL(zk.PermAll)}
	s, err := NewSession(ctx, conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	probers.Lock()
	p := probers.m[conn]
	probers.Unlock()
	deadline := s.Deadline()
	closed := time.Now()
	before := p.sent.Load()
	conn.Close()
	select {
	case <-s.Context().Done():
	case <-ctx.Done():
		t.Fatal("the Session outlived its closed connection by a minute")
	}
	took := time.Since(closed)
	if late := time.Since(deadline); late > 2*pollInterval+time.Second {
		t.Errorf("the Session ended %v after its client-side deadline", late)
	}
	// At most one Sync per poll interval, plus the few sent at once.
	sent := p.sent.Load() - before
	if limit := int64(took/pollInterval) + 5; sent > limit {
		t.Errorf("%d Syncs sent in the %v between the close and the Session's end, want ≤ %d (paced)", sent, took.Round(time.Millisecond), limit)
	}
	t.Logf("%d Syncs in %v; ended with %v", sent, took.Round(time.Millisecond), context.Cause(s.Context()))
}
