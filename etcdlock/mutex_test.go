package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestFIFOOrder(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "fifo"))
	qw := watchQueue(t, cli, "fifo")

	const n = 5
	results := make([]<-chan result, n)
	for i := range n {
		// Each waiter has its own client and session, like separate
		// processes; the next one starts only once this one is queued.
		m := newMutex(t, newSession(t, newClient(t, clus, i%3)), "fifo")
		results[i] = lockAsync(testCtx(t), m)
		qw.nextPut()
	}
	prev := holder.Token()
	mustUnlock(t, holder)
	for i := range n {
		r := recv(t, results[i], fmt.Sprintf("waiter %d", i))
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		if !r.lease.Token().Newer(prev) {
			t.Fatalf("waiter %d: token %v not newer than %v", i, r.lease.Token(), prev)
		}
		for j := i + 1; j < n; j++ {
			select {
			case r := <-results[j]:
				t.Fatalf("waiter %d acquired (err %v) while waiter %d holds", j, r.err, i)
			default:
			}
		}
		prev = r.lease.Token()
		mustUnlock(t, r.lease)
	}
	if keys := queueKeys(t, cli, "fifo"); len(keys) != 0 {
		t.Fatalf("keys left behind: %v", keys)
	}
}

func TestTryLockExactlyOne(t *testing.T) {
	clus := newCluster(t)
	const n = 5
	muts := make([]*etcdlock.Mutex, n)
	for i := range muts {
		muts[i] = newMutex(t, newSession(t, newClient(t, clus, i%3)), "try")
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []*distlock.Lease
		locked int
	)
	start := make(chan struct{})
	for _, m := range muts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := m.TryLock(testCtx(t))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, l)
			case errors.Is(err, distlock.ErrLocked):
				locked++
			default:
				t.Errorf("TryLock: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != 1 || locked != n-1 {
		t.Fatalf("%d winners, %d ErrLocked; want 1 and %d", len(won), locked, n-1)
	}
	if keys := queueKeys(t, clus.Client(0), "try"); len(keys) != 1 {
		t.Fatalf("losers left keys behind: %v", keys)
	}
	// A loser's error names the holder's entry.
	_, err := muts[0].TryLock(testCtx(t))
	var le *distlock.LockError
	if !errors.As(err, &le) || le.Name != "try" || le.Op != "trylock" {
		t.Fatalf("TryLock error %v: want a *LockError for lock \"try\"", err)
	}
	mustUnlock(t, won[0])
	l, err := muts[1].TryLock(testCtx(t))
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	mustUnlock(t, l)
}

func TestCancelWaitingLockLeavesNoKey(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "cancel"))
	qw := watchQueue(t, cli, "cancel")

	ctx, cancel := context.WithCancel(context.Background())
	res := lockAsync(ctx, newMutex(t, newSession(t, newClient(t, clus, 1)), "cancel"))
	qw.nextPut()
	cancel()
	r := recv(t, res, "cancelled Lock")
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lock after cancel: %v, want context.Canceled", r.err)
	}
	if keys := queueKeys(t, cli, "cancel"); len(keys) != 1 {
		t.Fatalf("keys after cancel: %v, want only the holder's", keys)
	}

	// A deadline that passes while waiting is the same failure path.
	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	_, err := newMutex(t, newSession(t, newClient(t, clus, 2)), "cancel").Lock(dctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past deadline: %v", err)
	}
	if keys := queueKeys(t, cli, "cancel"); len(keys) != 1 {
		t.Fatalf("keys after deadline: %v, want only the holder's", keys)
	}
	mustUnlock(t, holder)
}

func TestWaiterSessionEnds(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "ends"))
	qw := watchQueue(t, cli, "ends")

	// Revoked on the server, as if it had expired.
	ws := newSession(t, newClient(t, clus, 1))
	res := lockAsync(testCtx(t), newMutex(t, ws, "ends"))
	qw.nextPut()
	if _, err := cli.Revoke(testCtx(t), ws.Lease()); err != nil {
		t.Fatal(err)
	}
	r := recv(t, res, "Lock of the revoked waiter")
	if r.err == nil {
		t.Fatal("Lock reported acquired after its session's lease was revoked")
	}
	if !errors.Is(r.err, distlock.ErrEntryGone) && !errors.Is(r.err, distlock.ErrSessionExpired) {
		t.Fatalf("Lock after revoke: %v, want ErrEntryGone or ErrSessionExpired", r.err)
	}

	// Closed by its owner.
	cs := newSession(t, newClient(t, clus, 2))
	res = lockAsync(testCtx(t), newMutex(t, cs, "ends"))
	qw.nextPut()
	if err := cs.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	r = recv(t, res, "Lock of the closed waiter")
	if !errors.Is(r.err, distlock.ErrSessionClosed) {
		t.Fatalf("Lock after Close: %v, want ErrSessionClosed", r.err)
	}
	if _, err := newMutex(t, cs, "ends").Lock(testCtx(t)); !errors.Is(err, distlock.ErrSessionClosed) {
		t.Fatalf("Lock on a closed session: %v", err)
	}
	if keys := queueKeys(t, cli, "ends"); len(keys) != 1 {
		t.Fatalf("keys: %v, want only the holder's", keys)
	}
	mustUnlock(t, holder)
}

func TestHolderLeaseRevoked(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	hs := newSession(t, newClient(t, clus, 1))
	holder := mustLock(t, newMutex(t, hs, "revoked"))
	qw := watchQueue(t, cli, "revoked")
	res := lockAsync(testCtx(t), newMutex(t, newSession(t, newClient(t, clus, 2)), "revoked"))
	qw.nextPut()

	if _, err := cli.Revoke(testCtx(t), hs.Lease()); err != nil {
		t.Fatal(err)
	}
	recv(t, holder.Done(), "holder's Done")
	if err := holder.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("holder Err: %v, want ErrLost", err)
	}
	r := successor(t, res, holder.Token(), "successor")
	if err := holder.Unlock(testCtx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock of a lost lock: %v, want ErrLost", err)
	}
	if keys := queueKeys(t, cli, "revoked"); len(keys) != 1 {
		t.Fatalf("the lost holder's Unlock touched the successor's key: %v", keys)
	}
	mustUnlock(t, r)
}

func TestEntryDeletedWhileHeld(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "deleted"))
	keys := queueKeys(t, cli, "deleted")
	if _, err := cli.Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
	recv(t, holder.Done(), "holder's Done")
	if err := holder.Err(); !errors.Is(err, distlock.ErrEntryGone) || !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Err: %v, want ErrLost and ErrEntryGone", err)
	}
}

func TestMiddleWaiterDies(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "middle"))
	qw := watchQueue(t, cli, "middle")
	var sessions []*etcdlock.Session
	var results []<-chan result
	for i := range 3 {
		s := newSession(t, newClient(t, clus, i))
		sessions = append(sessions, s)
		results = append(results, lockAsync(testCtx(t), newMutex(t, s, "middle")))
		qw.nextPut()
	}
	// The middle waiter's process dies: nothing of it cleans up, the
	// server drops its lease.
	if _, err := cli.Revoke(testCtx(t), sessions[1].Lease()); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, results[1], "dead waiter"); r.err == nil {
		t.Fatal("the dead waiter acquired")
	}
	mustUnlock(t, holder)
	r0 := recv(t, results[0], "first waiter")
	if r0.err != nil {
		t.Fatal(r0.err)
	}
	select {
	case r := <-results[2]:
		t.Fatalf("last waiter acquired (err %v) while the first holds", r.err)
	default:
	}
	mustUnlock(t, r0.lease)
	r2 := recv(t, results[2], "last waiter")
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	if !r2.lease.Token().Newer(r0.lease.Token()) {
		t.Fatal("tokens not increasing")
	}
	mustUnlock(t, r2.lease)
}

func TestCompactionWhileWaiting(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "compact"))
	qw := watchQueue(t, cli, "compact")
	res := lockAsync(testCtx(t), newMutex(t, newSession(t, newClient(t, clus, 1)), "compact"))
	qw.nextPut()

	var rev int64
	for i := range 20 {
		resp, err := cli.Put(testCtx(t), fmt.Sprintf("/other/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(testCtx(t), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, holder)
	r := recv(t, res, "waiter after compaction")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The new holder still notices its entry going after the compaction.
	keys := queueKeys(t, cli, "compact")
	if _, err := cli.Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
	recv(t, r.lease.Done(), "Done after compaction")
}

func TestSameSessionGoroutinesExclude(t *testing.T) {
	clus := newCluster(t)
	s := newSession(t, clus.Client(0))
	m := newMutex(t, s, "shared-session")
	qw := watchQueue(t, clus.Client(0), "shared-session")
	first := mustLock(t, m)
	res := lockAsync(testCtx(t), m)
	qw.nextPut() // the second goroutine's own entry
	select {
	case r := <-res:
		t.Fatalf("second Lock on the same session returned (err %v) while the first holds", r.err)
	default:
	}
	mustUnlock(t, first)
	r := successor(t, res, first.Token(), "second Lock")
	mustUnlock(t, r)
}

func TestNamesDoNotInterfere(t *testing.T) {
	clus := newCluster(t)
	s := newSession(t, clus.Client(0))
	a := mustLock(t, newMutex(t, s, "a"))
	ab := mustLock(t, newMutex(t, s, "a/b"))
	// Both held at once; TryLock on either sees only its own queue.
	if _, err := newMutex(t, s, "a").TryLock(testCtx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock a: %v", err)
	}
	mustUnlock(t, a)
	l, err := newMutex(t, s, "a").TryLock(testCtx(t))
	if err != nil {
		t.Fatalf("TryLock a while a/b is held: %v", err)
	}
	mustUnlock(t, l)
	mustUnlock(t, ab)
}

func TestDoubleUnlock(t *testing.T) {
	clus := newCluster(t)
	l := mustLock(t, newMutex(t, newSession(t, clus.Client(0)), "twice"))
	mustUnlock(t, l)
	if err := l.Unlock(testCtx(t)); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("second Unlock: %v, want ErrReleased", err)
	}
	if !errors.Is(l.Err(), distlock.ErrReleased) {
		t.Fatalf("Err after Unlock: %v", l.Err())
	}
}

func TestDo(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	m := newMutex(t, newSession(t, cli), "do")
	var got distlock.Token
	err := distlock.Do(testCtx(t), m, func(ctx context.Context, tok distlock.Token) error {
		got = tok
		if keys := queueKeys(t, cli, "do"); len(keys) != 1 {
			t.Errorf("keys while held: %v", keys)
		}
		return nil
	})
	if err != nil || got.Name != "do" || got.Seq <= 0 {
		t.Fatalf("Do: err %v, token %v", err, got)
	}
	if keys := queueKeys(t, cli, "do"); len(keys) != 0 {
		t.Fatalf("Do left keys: %v", keys)
	}
}

func TestBadInput(t *testing.T) {
	clus := newCluster(t)
	ctx := testCtx(t)
	if _, err := etcdlock.NewSession(ctx, nil); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil client: %v", err)
	}
	if _, err := etcdlock.NewMutex(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil session: %v", err)
	}
	if _, err := etcdlock.NewSession(ctx, clus.Client(0), etcdlock.WithTTL(time.Second)); !errors.Is(err, distlock.ErrTTLTooShort) {
		t.Fatalf("1s TTL: %v", err)
	}
	s := newSession(t, clus.Client(0))
	for _, name := range []string{"", "/a", "a/", "a//b", "a/../b", "a@1", "a b", "ä"} {
		_, err := etcdlock.NewMutex(s, name)
		if !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("name %q: %v, want ErrInvalidName", name, err)
		}
	}
}
