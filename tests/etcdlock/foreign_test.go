package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	rcp "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// These tests put etcd's own recipes (the concurrency package's Mutex and
// Election, the v3lock service, the contrib RWMutex) in the same queue as
// the library's, under the same name, and check the safety floor: no
// lock, read lock or leadership is granted while an older conflicting
// foreign entry is there.

const fpfx = etcdlock.DefaultPrefix

// concSession returns a concurrency session on cli, closed (its lease
// revoked) when the test ends.
func concSession(t *testing.T, cli *clientv3.Client, opts ...concurrency.SessionOption) *concurrency.Session {
	t.Helper()
	cs, err := concurrency.NewSession(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// notYet fails the test if res delivers within a short window: the
// waiter must still be waiting. A negative check needs some window; it
// is short, since a grant the floor forgot comes at once.
func notYet[T any](t *testing.T, res <-chan T, what string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("%s: got %+v while the foreign entry is ahead", what, r)
	case <-time.After(300 * time.Millisecond):
	}
}

// waitEntries waits, on admin's WatchQueue, until lock name's queue
// shows n entries, and returns it.
func waitEntries(t *testing.T, admin *recipe.Admin, name string, n int) []distlock.QueueEntry {
	t.Helper()
	var got []distlock.QueueEntry
	enough := errors.New("enough")
	err := admin.WatchQueue(testCtx(t), name, func(q []distlock.QueueEntry) error {
		if len(q) == n {
			got = q
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("waiting for %d entries of %s: %v", n, name, err)
	}
	return got
}

// noKeys fails the test if anything is left under lock name + "/".
func noKeys(t *testing.T, cli *clientv3.Client, name string) {
	t.Helper()
	resp, err := cli.Get(testCtx(t), fpfx+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if !isTermRecord(kv.Key) {
			t.Errorf("key %s left", kv.Key)
		}
	}
}

// TestForeignEtcdMutexAhead: a distlock Mutex waits for an etcd
// concurrency Mutex holding the same name, and gets the lock once it
// unlocks; Inspect lists the foreign holder with its client and token.
func TestForeignEtcdMutexAhead(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	fm := concurrency.NewMutex(cs, fpfx+"fm")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	res := lockAsync(ctx, newMutex(t, s, "fm"))
	admin := mustAdmin(t, cli)
	q := waitEntries(t, admin, "fm", 2)
	f, own := q[0], q[1]
	if f.Client != distlock.ClientEtcd || !f.Holding || f.Position != 1 || f.Key != fm.Key() ||
		f.Kind != distlock.Exclusive || f.Token.Owner != uint64(cs.Lease()) || f.Owner != strconv.FormatInt(int64(cs.Lease()), 16) {
		t.Errorf("foreign entry %+v; want etcd's holder %s at position 1, owner %x", f, fm.Key(), cs.Lease())
	}
	if kr, err := cli.Get(ctx, fm.Key()); err != nil || len(kr.Kvs) != 1 || f.Token.Seq != kr.Kvs[0].CreateRevision {
		t.Errorf("foreign token %+v; want the key's create revision (%v)", f.Token, err)
	}
	if own.Client != "" || own.Holding || own.Position != 2 {
		t.Errorf("own entry %+v; want a waiter at position 2", own)
	}
	notYet(t, res, "distlock Lock")
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := recv(t, res, "distlock Lock after the etcd Mutex's unlock")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	if l.Lease.Token().Seq <= f.Token.Seq {
		t.Errorf("token %v not after the foreign one %v", l.Lease.Token(), f.Token)
	}
	mustUnlock(t, l.Lease)
	noKeys(t, cli, "fm")
}

// TestForeignTryLock: TryLock and TryRLock fail with ErrLocked while an
// etcd Mutex holds the name, and write nothing; a recipes reader lets a
// TryRLock through but not a TryLock.
func TestForeignTryLock(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)

	fm := concurrency.NewMutex(cs, fpfx+"ft")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newMutex(t, s, "ft").TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with an etcd Mutex holding: %v, want ErrLocked", err)
	}
	rw, err := recipe.NewRWMutex(s, "ft")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryRLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryRLock with an etcd Mutex holding: %v, want ErrLocked", err)
	}
	if keys := queueKeys(t, cli, "ft"); len(keys) != 0 {
		t.Fatalf("refused Try left %v", keys)
	}
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, mustLockTry(t, newMutex(t, s, "ft")))

	// A recipes reader: shared with a reader, not with a writer.
	fr := rcp.NewRWMutex(cs, fpfx+"ft")
	if err := fr.RLock(); err != nil {
		t.Fatal(err)
	}
	rl, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock beside a recipes reader: %v", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with a recipes reader holding: %v, want ErrLocked", err)
	}
	mustUnlock(t, rl)
	if err := fr.RUnlock(); err != nil {
		t.Fatal(err)
	}
	noKeys(t, cli, "ft")
}

func mustLockTry(t *testing.T, m *recipe.Mutex) *distlock.Lease {
	t.Helper()
	l, err := m.TryLock(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestForeignRecipesRWMutex: the contrib RWMutex's writer keeps both a
// distlock reader and writer out; its reader shares with a distlock
// reader and keeps a distlock writer out.
func TestForeignRecipesRWMutex(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	rw, err := recipe.NewRWMutex(s, "frw")
	if err != nil {
		t.Fatal(err)
	}
	admin := mustAdmin(t, cli)

	fw := rcp.NewRWMutex(cs, fpfx+"frw")
	if err := fw.Lock(); err != nil {
		t.Fatal(err)
	}
	res := lockAsync(ctx, rw.RLocker())
	q := waitEntries(t, admin, "frw", 2)
	if q[0].Client != distlock.ClientEtcdRecipes || q[0].Kind != distlock.Exclusive || !q[0].Holding {
		t.Errorf("foreign writer %+v", q[0])
	}
	notYet(t, res, "distlock RLock behind a recipes writer")
	if err := fw.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := recv(t, res, "distlock RLock after the writer's unlock")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	mustUnlock(t, r.Lease)

	fr := rcp.NewRWMutex(cs, fpfx+"frw")
	if err := fr.RLock(); err != nil {
		t.Fatal(err)
	}
	rl := mustLock(t, rw.RLocker()) // shares with the foreign reader
	wres := lockAsync(ctx, rw)
	q = waitEntries(t, admin, "frw", 3)
	if q[0].Client != distlock.ClientEtcdRecipes || q[0].Kind != distlock.Shared || !q[0].Holding || !q[1].Holding || q[2].Holding {
		t.Errorf("queue %+v; want the recipes reader and ours holding, our writer waiting", q)
	}
	mustUnlock(t, rl)
	notYet(t, wres, "distlock Lock behind a recipes reader")
	if err := fr.RUnlock(); err != nil {
		t.Fatal(err)
	}
	w := recv(t, wres, "distlock Lock after the reader's unlock")
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	mustUnlock(t, w.Lease)
	noKeys(t, cli, "frw")
}

// TestForeignElection: a distlock candidate after an etcd Election's
// candidate does not lead until that one resigns.
func TestForeignElection(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	ce := concurrency.NewElection(cs, fpfx+"fe")
	if err := ce.Campaign(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	e, err := recipe.NewElection(s, "fe")
	if err != nil {
		t.Fatal(err)
	}
	type lead struct {
		l   distlock.Leadership
		err error
	}
	res := make(chan lead, 1)
	go func() {
		l, err := e.Campaign(ctx, "ours")
		res <- lead{l, err}
	}()
	admin := mustAdmin(t, cli)
	q := waitEntries(t, admin, "fe", 3) // the foreign key as a lock entry and as a candidate, ours
	var cand []distlock.QueueEntry
	for _, x := range q {
		if x.Kind == distlock.Candidate {
			cand = append(cand, x)
		}
	}
	if len(cand) != 2 || cand[0].Client != distlock.ClientEtcd || !cand[0].Holding || cand[1].Holding || cand[1].Client != "" {
		t.Errorf("candidates %+v; want etcd's leading, ours waiting", cand)
	}
	notYet(t, res, "distlock Campaign behind an etcd candidate")
	if err := ce.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, res, "distlock Campaign after the etcd candidate resigned")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	noKeys(t, cli, "fe")
}

// TestForeignV3Lock: the v3lock service's lock (what etcdctl lock uses)
// holds a distlock waiter off until it unlocks.
func TestForeignV3Lock(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), lease.ID)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	lr, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(fpfx + "fv"), Lease: int64(lease.ID)})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	res := lockAsync(ctx, newMutex(t, s, "fv"))
	q := waitEntries(t, mustAdmin(t, cli), "fv", 2)
	if q[0].Client != distlock.ClientEtcd || q[0].Key != string(lr.Key) || q[0].Token.Owner != uint64(lease.ID) {
		t.Errorf("foreign entry %+v; want v3lock's %s", q[0], lr.Key)
	}
	notYet(t, res, "distlock Lock behind a v3lock holder")
	if _, err := lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: lr.Key}); err != nil {
		t.Fatal(err)
	}
	l := recv(t, res, "distlock Lock after the v3lock unlock")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	mustUnlock(t, l.Lease)
	noKeys(t, cli, "fv")
}

// TestForeignWaitsForUs: the reverse direction, which etcd's Mutex does
// by itself: it waits for a distlock holder.
func TestForeignWaitsForUs(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	s := newSession(t, cli)
	l := mustLock(t, newMutex(t, s, "fr"))
	cs := concSession(t, cli)
	fm := concurrency.NewMutex(cs, fpfx+"fr")
	done := make(chan error, 1)
	go func() { done <- fm.Lock(ctx) }()
	waitEntries(t, mustAdmin(t, cli), "fr", 2)
	notYet(t, done, "etcd Mutex behind a distlock holder")
	mustUnlock(t, l)
	if err := recv(t, done, "etcd Mutex after the distlock unlock"); err != nil {
		t.Fatal(err)
	}
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	noKeys(t, cli, "fr")
}

// TestForeignLeaseExpiry: a foreign holder whose lease expires (its
// client gone, no revoke) releases the distlock waiter.
func TestForeignLeaseExpiry(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	fcli := newClient(t, clus, 1)
	cs, err := concurrency.NewSession(fcli, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	fm := concurrency.NewMutex(cs, fpfx+"fx")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	res := lockAsync(ctx, newMutex(t, s, "fx"))
	waitEntries(t, mustAdmin(t, cli), "fx", 2)
	fcli.Close() // keepalives stop; the lease expires
	l := recv(t, res, "distlock Lock after the foreign lease expired")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	mustUnlock(t, l.Lease)
	noKeys(t, cli, "fx")
}

// TestForeignSubLockNoise: a longer lock name's entries ("N/sub", held and
// waited for, by distlock and by etcd's Mutex) and a key of no known
// client do not make N wait; an etcd Mutex of N older than all that noise
// still does, for Lock and TryLock.
func TestForeignSubLockNoise(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	admin := mustAdmin(t, cli)

	// "nz": etcd's Mutex first, then the noise. Its lease is chosen so
	// that its key is in the same range as the noise (a hex letter
	// first), behind more noise than one read takes.
	const fid = 0xf00d1
	if _, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 30, ID: fid}); err != nil {
		t.Fatal(err)
	}
	fcs := concSession(t, cli, concurrency.WithLease(fid))
	fm := concurrency.NewMutex(fcs, fpfx+"nz")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	noise := func(name string) {
		sub := fpfx + name + "/sub"
		subm := concurrency.NewMutex(cs, sub)
		if err := subm.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		for i := range 8 {
			lockAsync(wctx, newMutex(t, newSession(t, cli), fmt.Sprintf("%s/sub%d", name, i%2)))
		}
		for i := range 2 {
			waitEntries(t, admin, fmt.Sprintf("%s/sub%d", name, i), 4)
		}
		// Behind etcd's holder of the longer name.
		lockAsync(wctx, newMutex(t, newSession(t, cli), name+"/sub"))
		lockAsync(wctx, newMutex(t, newSession(t, cli), name+"/sub"))
		waitEntries(t, admin, name+"/sub", 3)
		if _, err := cli.Put(ctx, fpfx+name+"/config", "x"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Delete(context.Background(), fpfx+name+"/config") })
	}
	noise("nz")
	s := newSession(t, cli)
	if _, err := newMutex(t, s, "nz").TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock behind an etcd Mutex, noise between: %v, want ErrLocked", err)
	}
	if keys := queueKeys(t, cli, "nz"); len(keys) != 0 {
		t.Fatalf("refused Try left %v", keys)
	}
	res := lockAsync(ctx, newMutex(t, s, "nz"))
	q := waitEntries(t, admin, "nz", 3) // etcd's, ours, the unknown key
	if q[0].Key != fpfx+"nz/f00d1" || !q[0].Holding || q[1].Holding || q[2].Client != distlock.ClientUnknown {
		t.Errorf("Inspect(nz) = %+v", q)
	}
	notYet(t, res, "distlock Lock behind an etcd Mutex, noise between")
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := recv(t, res, "distlock Lock after the etcd Mutex's unlock")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	mustUnlock(t, l.Lease)

	// "nn": noise alone: TryLock and Lock hold at once.
	noise("nn")
	mustUnlock(t, mustLockTry(t, newMutex(t, s, "nn")))
	mustUnlock(t, mustLock(t, newMutex(t, s, "nn")))
	q, err := admin.Inspect(ctx, "nn")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Client != distlock.ClientUnknown || q[0].Position != 0 || q[0].Holding || q[0].Key != fpfx+"nn/config" {
		t.Errorf("Inspect(nn) = %+v; want the unknown key alone, position 0", q)
	}
	if keys := queueKeys(t, cli, "nn"); len(keys) != 0 {
		t.Fatalf("left %v", keys)
	}
}

// TestForeignLockDelay: with a lock-delay, an etcd Mutex's unlock (its
// lease alive, which its key names) is a release: the waiter takes the
// lock at once, where the delay (far longer than the test) would
// otherwise hold it.
func TestForeignLockDelay(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	fm := concurrency.NewMutex(cs, fpfx+"fd")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli, recipe.WithLockDelay(time.Hour))
	res := lockAsync(ctx, newMutex(t, s, "fd"))
	waitEntries(t, mustAdmin(t, cli), "fd", 2)
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := recv(t, res, "distlock Lock after the etcd Mutex's unlock, no delay")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	mustUnlock(t, l.Lease)
	noKeys(t, cli, "fd")
}

// TestForeignMultiMutex: a multi-lock waits for an etcd Mutex holding one
// of its names, and its TryLock is refused, writing nothing.
func TestForeignMultiMutex(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	fm := concurrency.NewMutex(cs, fpfx+"mb")
	if err := fm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	mm, err := recipe.NewMultiMutex(s, "ma", "mb", "mc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mm.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("multi TryLock with an etcd Mutex on mb: %v, want ErrLocked", err)
	}
	for _, n := range []string{"ma", "mb", "mc"} {
		if keys := queueKeys(t, cli, n); len(keys) != 0 {
			t.Fatalf("refused multi Try left %v in %s", keys, n)
		}
	}
	res := lockAsync(ctx, mm)
	waitEntries(t, mustAdmin(t, cli), "mb", 2)
	notYet(t, res, "multi Lock behind an etcd Mutex on one name")
	if err := fm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := recv(t, res, "multi Lock after the etcd Mutex's unlock")
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	mustUnlock(t, l.Lease)
	for _, n := range []string{"ma", "mb", "mc"} {
		noKeys(t, cli, n)
	}
}

// TestForeignElectionTwo: a distlock candidate behind two etcd candidates
// leads only once both are gone; an etcd candidate after a distlock
// leader does not lead before it resigns (etcd's own rule).
func TestForeignElectionTwo(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	ce1 := concurrency.NewElection(concSession(t, cli), fpfx+"f2")
	if err := ce1.Campaign(ctx, "etcd-1"); err != nil {
		t.Fatal(err)
	}
	ce2 := concurrency.NewElection(concSession(t, cli), fpfx+"f2")
	second := make(chan error, 1)
	go func() { second <- ce2.Campaign(ctx, "etcd-2") }()
	admin := mustAdmin(t, cli)
	waitEntries(t, admin, "f2", 2)

	e, err := recipe.NewElection(newSession(t, cli), "f2")
	if err != nil {
		t.Fatal(err)
	}
	type lead struct {
		l   distlock.Leadership
		err error
	}
	res := make(chan lead, 1)
	go func() {
		l, err := e.Campaign(ctx, "ours")
		res <- lead{l, err}
	}()
	waitEntries(t, admin, "f2", 5) // two foreign lock entries, three candidates
	if err := ce1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, second, "the second etcd candidate after the first resigned"); err != nil {
		t.Fatal(err)
	}
	notYet(t, res, "distlock Campaign behind the second etcd candidate")
	if err := ce2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, res, "distlock Campaign after both etcd candidates resigned")
	if r.err != nil {
		t.Fatal(r.err)
	}

	// The reverse: etcd's candidate waits for ours.
	ce3 := concurrency.NewElection(concSession(t, cli), fpfx+"f2")
	third := make(chan error, 1)
	go func() { third <- ce3.Campaign(ctx, "etcd-3") }()
	waitEntries(t, admin, "f2", 3) // ours leading, etcd's lock entry and candidate
	notYet(t, third, "etcd Campaign behind a distlock leader")
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, third, "etcd Campaign after the distlock leader resigned"); err != nil {
		t.Fatal(err)
	}
	if err := ce3.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	noKeys(t, cli, "f2")
}
