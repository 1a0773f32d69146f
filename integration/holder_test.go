package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/internal/proc"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestHolder runs lock holders as real processes against one etcd cluster.
func TestHolder(t *testing.T) {
	c := integration.NewEtcd(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	spec := func(lock string) integration.HolderSpec {
		return integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), Lock: lock, TTL: etcdlock.MinTTL}
	}

	// The seed scenario: a holder stopped past its TTL (a GC pause) loses
	// the lock to a successor without knowing; when it wakes up it is told
	// it lost, and its unlock cannot touch the successor's entry.
	t.Run("gc pause", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		a := integration.NewHolder(t, spec("report"))
		t1 := a.Token()
		aKV := entryOf(ctx, t, cli, t1)
		if aKV == nil {
			t.Fatalf("A holds %v but has no entry in etcd", t1)
		}
		if held, lost, err := a.Ping(ctx); err != nil || !held || lost {
			t.Fatalf("A before the pause: held=%v lost=%v err=%v, want held", held, lost, err)
		}
		b := newMutex(ctx, t, cli, "report")

		if err := a.Pause(); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		lb, err := b.Lock(lockCtx)
		cancel()
		if err != nil {
			t.Fatalf("B's Lock while A is paused: %v", err)
		}
		t.Logf("B acquired %v after A was paused", time.Since(paused).Round(time.Millisecond))
		t2 := lb.Token()
		if !t2.Newer(t1) {
			t.Fatalf("B's token %v is not newer than A's %v", t2, t1)
		}
		// B got the lock because the server expired A's lease, while A was
		// still stopped and could neither keep it alive nor notice.
		if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(aKV.Lease)); err != nil || ttl.TTL != -1 {
			t.Fatalf("A's lease %x when B acquired: %+v %v, want expired (TTL -1)", aKV.Lease, ttl, err)
		}
		if kv := entryOf(ctx, t, cli, t1); kv != nil {
			t.Fatalf("A's entry %s still exists when B acquired", kv.Key)
		}
		if s := procState(t, a.PID()); s != 'T' {
			t.Fatalf("A's state when B acquired: %c, want T (stopped)", s)
		}

		if err := a.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed := time.Now()
		select {
		case <-a.Lost():
		case <-time.After(30 * time.Second):
			t.Fatal("A was not told it lost the lock within 30s of waking up")
		}
		t.Logf("A heard it lost %v after SIGCONT: %s", time.Since(resumed).Round(time.Millisecond), a.LostError())
		if !strings.Contains(a.LostError(), distlock.ErrLost.Error()) {
			t.Errorf("A's lost event: %q, want it to say %q", a.LostError(), distlock.ErrLost)
		}
		if held, lost, err := a.Ping(ctx); err != nil || held || !lost {
			t.Fatalf("A after waking up: held=%v lost=%v err=%v, want lost", held, lost, err)
		}

		// A's late unlock reports the loss and deletes nothing of B's.
		if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("A's Unlock after the loss: %v, want ErrLost", err)
		}
		kv := entryOf(ctx, t, cli, t2)
		if kv == nil {
			t.Fatalf("B's entry for %v is gone after A's Unlock", t2)
		}
		if uint64(kv.Lease) != t2.Owner {
			t.Fatalf("B's entry is bound to lease %x, want B's %x", kv.Lease, t2.Owner)
		}
		select {
		case <-lb.Done():
			t.Fatalf("B's lease ended: %v", lb.Err())
		default:
		}
		// B's own guarded delete finds its entry intact.
		if err := lb.Unlock(ctx); err != nil {
			t.Fatalf("B's Unlock: %v", err)
		}
	})

	t.Run("unlock hands over", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		a := integration.NewHolder(t, spec("handover"))
		t1 := a.Token()
		b := newMutex(ctx, t, cli, "handover")
		type result struct {
			lease *distlock.Lease
			err   error
		}
		acquired := make(chan result, 1)
		go func() {
			l, err := b.Lock(ctx)
			acquired <- result{l, err}
		}()
		// Wait until B is queued behind A: both entries are in etcd.
		if err := poll(ctx, func() error {
			if n := len(entries(ctx, t, cli, "handover")); n != 2 {
				return fmt.Errorf("%d entries, want 2", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if held, lost, err := a.Ping(ctx); err != nil || !held || lost {
			t.Fatalf("A with B waiting: held=%v lost=%v err=%v, want held", held, lost, err)
		}
		select {
		case r := <-acquired:
			t.Fatalf("B's Lock returned while A holds: %v", r.err)
		default:
		}

		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("A's Unlock: %v", err)
		}
		r := <-acquired
		if r.err != nil {
			t.Fatalf("B's Lock after A's Unlock: %v", r.err)
		}
		if t2 := r.lease.Token(); !t2.Newer(t1) {
			t.Fatalf("B's token %v is not newer than A's %v", t2, t1)
		}
		if held, lost, err := a.Ping(ctx); err != nil || held || lost {
			t.Fatalf("A after its Unlock: held=%v lost=%v err=%v, want neither", held, lost, err)
		}
		if err := a.Unlock(ctx); err == nil || errors.Is(err, distlock.ErrLost) {
			t.Fatalf("A's second Unlock: %v, want a 'not held' error", err)
		}
		select {
		case <-a.Lost():
			t.Fatalf("A reported a loss after a clean unlock: %s", a.LostError())
		default:
		}
		if err := r.lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		pid := a.PID()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("holder process %d still runs after Close", pid)
		}
		if err := a.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})

	// Closing a paused holder continues it, and it unlocks on its way out.
	t.Run("close paused", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		a := integration.NewHolder(t, spec("closed"))
		if err := a.Pause(); err != nil {
			t.Fatal(err)
		}
		pid := a.PID()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("holder process %d still runs after Close", pid)
		}
		if n := len(entries(ctx, t, cli, "closed")); n != 0 {
			t.Fatalf("%d entries left after the holder closed", n)
		}
		if _, _, err := a.Ping(ctx); err == nil {
			t.Fatal("Ping of a closed holder succeeded")
		}
	})

	t.Run("unknown backend", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		s := spec("nope")
		s.Backend = "redis"
		h, err := integration.StartHolder(ctx, s)
		if err == nil {
			h.Close()
			t.Fatal("a redis holder started")
		}
		if !strings.Contains(err.Error(), "unknown backend") {
			t.Fatalf("redis holder: %v", err)
		}
	})
}

// TestHolderZooKeeper runs a lock holder with a zklock Mutex as a real
// process: stopped past its session timeout, it loses the lock to a
// successor, and is told so when it wakes up.
func TestHolderZooKeeper(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	ctx := ctxFor(t, 2*time.Minute)
	a := integration.NewHolder(t, integration.HolderSpec{Backend: "zk", Endpoints: ens.Addrs(), Lock: "report", TTL: 4 * time.Second})
	t1 := a.Token()
	if held, lost, err := a.Ping(ctx); err != nil || !held || lost {
		t.Fatalf("A before the pause: held=%v lost=%v err=%v, want held", held, lost, err)
	}
	conn, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	b, err := recipe.NewMutex(sess, "report")
	if err != nil {
		t.Fatal(err)
	}

	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	lockCtx, cancel := context.WithTimeout(ctx, time.Minute)
	lb, err := b.Lock(lockCtx)
	cancel()
	if err != nil {
		t.Fatalf("B's Lock while A is paused: %v", err)
	}
	t.Logf("B acquired %v after A was paused", time.Since(paused).Round(time.Millisecond))
	if t2 := lb.Token(); !t2.Newer(t1) {
		t.Fatalf("B's token %v is not newer than A's %v", t2, t1)
	}
	if s := procState(t, a.PID()); s != 'T' {
		t.Fatalf("A's state when B acquired: %c, want T (stopped)", s)
	}
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-ctx.Done():
		t.Fatal("A was not told it lost the lock after waking up")
	}
	if !strings.Contains(a.LostError(), distlock.ErrLost.Error()) {
		t.Errorf("A's lost event: %q, want it to say %q", a.LostError(), distlock.ErrLost)
	}
	if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("A's Unlock after the loss: %v, want ErrLost", err)
	}
	select {
	case <-lb.Done():
		t.Fatalf("B's lease ended: %v", lb.Err())
	default:
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatalf("B's Unlock: %v", err)
	}
}

// newMutex returns a Mutex on a session of its own (closed with the test).
func newMutex(ctx context.Context, t *testing.T, cli *clientv3.Client, name string) *recipe.Mutex {
	t.Helper()
	sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	mu, err := recipe.NewMutex(sess, name)
	if err != nil {
		t.Fatal(err)
	}
	return mu
}

// entries returns the queue of lock name as etcd has it now.
func entries(ctx context.Context, t *testing.T, cli *clientv3.Client, name string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctx, etcdlock.DefaultPrefix+name+"/@", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// entryOf returns the entry whose acquisition tok is (its key's create
// revision is the token), or nil if it is gone.
func entryOf(ctx context.Context, t *testing.T, cli *clientv3.Client, tok distlock.Token) *mvccpb.KeyValue {
	t.Helper()
	for _, kv := range entries(ctx, t, cli, tok.Name) {
		if kv.CreateRevision == tok.Seq {
			return kv
		}
	}
	return nil
}

// procState returns the state letter of process pid (T: stopped).
func procState(t *testing.T, pid int) byte {
	t.Helper()
	st, err := proc.State(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
