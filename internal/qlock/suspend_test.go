package qlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/testserve"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// suspendTimeout bounds every wait in these tests: a failure bound, not a
// timing assertion.
const suspendTimeout = 60 * time.Second

func suspendCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), suspendTimeout)
	t.Cleanup(cancel)
	return ctx
}

// lostToSuspend holds the lock name on m, makes clk say the system was
// suspended for longer than ttl, and checks that the lease's Done closes
// with a loss that says so, and that the session ended with it.
func lostToSuspend(t *testing.T, clk *qlock.TestClock, m distlock.Locker, ttl time.Duration, sessionErr func() error) {
	t.Helper()
	l, err := m.Lock(suspendCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l.Deadline().IsZero() {
		t.Fatal("a held lock has no Deadline")
	}
	// The monotonic clock stands still, the boot clock moves on: what the
	// holder's process sees when the system resumes. Nothing else happens:
	// the store keeps the session alive, so only the suspend check can end it.
	slept := ttl + time.Second
	clk.Suspend(slept)
	select {
	case <-l.Done():
	case <-time.After(suspendTimeout):
		t.Fatalf("Done still open %v after a simulated %v suspend (TTL %v)", suspendTimeout, slept, ttl)
	}
	err = l.Err()
	var se *qlock.SuspendedError
	if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) || !errors.As(err, &se) {
		t.Fatalf("Err %v: want a loss matching ErrSessionExpired, caused by the suspend", err)
	}
	if se.Slept < slept-time.Millisecond { // within the clock readings' jitter
		t.Errorf("Slept %v, want the %v suspended", se.Slept, slept)
	}
	if !errors.As(sessionErr(), &se) {
		t.Errorf("session Err %v, want the suspend's", sessionErr())
	}
	if d := l.Deadline(); !d.IsZero() {
		t.Errorf("Deadline after Done: %v, want the zero Time", d)
	}
	t.Logf("lost: %v", err)
}

// TestSuspendEtcd: a lock held on a real etcd session whose process the
// test clock says was suspended past the TTL is lost at once, and a second
// session gets the lock.
func TestSuspendEtcd(t *testing.T) {
	clk := qlock.UseTestClock(t)
	eps := testserve.EtcdCluster(t, 1)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{eps[0]},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	session := func() *etcdlock.Session {
		s, err := etcdlock.NewSession(suspendCtx(t), cli, etcdlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Close(ctx)
		})
		return s
	}
	s := session()
	m, err := recipe.NewMutex(s, "suspend")
	if err != nil {
		t.Fatal(err)
	}
	lostToSuspend(t, clk, m, s.TTL(), s.Err)

	// The lease was revoked (or expires): the next holder gets in.
	m2, err := recipe.NewMutex(session(), "suspend")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := m2.Lock(suspendCtx(t))
	if err != nil {
		t.Fatalf("a second session's Lock after the suspended holder's loss: %v", err)
	}
	l2.Unlock(suspendCtx(t))
}

// TestSuspendZooKeeper is TestSuspendEtcd on a real ZooKeeper server.
func TestSuspendZooKeeper(t *testing.T) {
	clk := qlock.UseTestClock(t)
	ens := testserve.NewZooKeeper(t, 1)
	session := func() *zklock.Session {
		conn, events, err := ens.Connect(suspendCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		go func() {
			for range events {
			}
		}()
		s, err := zklock.NewSession(suspendCtx(t), conn, zklock.WithTickTime(testserve.ZooKeeperTickTime))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	s := session()
	m, err := recipe.NewMutex(s, "suspend")
	if err != nil {
		t.Fatal(err)
	}
	lostToSuspend(t, clk, m, s.TTL(), s.Err)

	m2, err := recipe.NewMutex(session(), "suspend")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := m2.Lock(suspendCtx(t))
	if err != nil {
		t.Fatalf("a second session's Lock after the suspended holder's loss: %v", err)
	}
	l2.Unlock(suspendCtx(t))
}
