package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"go.etcd.io/etcd/client/v3/concurrency"
	rcp "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// These tests share a lock with etcd's own clients in a compatibility
// mode (distlock.WithCompat), both ways: etcd's holders wait for
// distlock's as distlock's wait for theirs.

// newRWMutex returns an RWMutex of name on s with opts.
func newRWMutex(t *testing.T, s *etcdlock.Session, name string, opts ...distlock.LockOption) *recipe.RWMutex {
	t.Helper()
	rw, err := recipe.NewRWMutex(s, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rw
}

// withRecipes is the mode of these tests' RWMutexes.
var withRecipes = distlock.WithCompat(distlock.CompatEtcdRecipes)

// async runs f in the background and delivers its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// mustNil fails the test if err is not nil.
func mustNil(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestCompatRecipesWriterHolds: a distlock writer in CompatEtcdRecipes
// keeps a recipes reader out until it unlocks; its key is under
// name + "/write/", and Inspect lists it as distlock's own. Without the
// mode (the control) the recipes reader does not wait: its readers look
// for writers only there.
func TestCompatRecipesWriterHolds(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	admin := mustAdmin(t, cli)

	// The control: the library's own layout.
	l := mustLock(t, newRWMutex(t, s, "cw0"))
	fr := rcp.NewRWMutex(cs, fpfx+"cw0")
	if err := recv(t, async(fr.RLock), "recipes RLock beside an own-layout writer"); err != nil {
		t.Fatal(err)
	}
	t.Log("control: without the mode a recipes reader does not wait for a distlock writer")
	mustNil(t, fr.RUnlock(), "recipes RUnlock")
	mustUnlock(t, l)
	noKeys(t, cli, "cw0")

	// The mode.
	w := mustLock(t, newRWMutex(t, s, "cw", withRecipes))
	q, err := admin.Inspect(ctx, "cw")
	mustNil(t, err, "Inspect")
	if len(q) != 1 || q[0].Client != "" || !q[0].Holding || q[0].Kind != distlock.Exclusive ||
		!strings.HasPrefix(q[0].Key, fpfx+"cw/write/#w") || q[0].Token != w.Token() {
		t.Fatalf("queue %+v; want our writer holding, under cw/write/, token %v", q, w.Token())
	}
	if keys := queueKeys(t, cli, "cw"); len(keys) != 0 {
		t.Errorf("the moved writer left keys in the queue's directory: %v", keys)
	}
	fr = rcp.NewRWMutex(cs, fpfx+"cw")
	rres := async(fr.RLock)
	waitEntries(t, admin, "cw", 2)
	notYet(t, rres, "recipes RLock behind a distlock writer in CompatEtcdRecipes")
	mustUnlock(t, w)
	if err := recv(t, rres, "recipes RLock after the distlock writer's unlock"); err != nil {
		t.Fatal(err)
	}
	// And the recipes writer waits for our reader.
	r := mustLock(t, newRWMutex(t, s, "cw", withRecipes).RLocker())
	fw := rcp.NewRWMutex(cs, fpfx+"cw")
	mustNil(t, fr.RUnlock(), "recipes RUnlock")
	wres := async(fw.Lock)
	waitEntries(t, admin, "cw", 2)
	notYet(t, wres, "recipes Lock behind a distlock reader")
	mustUnlock(t, r)
	if err := recv(t, wres, "recipes Lock after the distlock reader's unlock"); err != nil {
		t.Fatal(err)
	}
	mustNil(t, fw.Unlock(), "recipes Unlock")
	noKeys(t, cli, "cw")
}

// TestCompatRecipesWriterAhead: a recipes writer keeps a distlock reader
// and writer of the mode out; and a distlock writer of the mode waits for
// a distlock reader and the other way round, as without it.
func TestCompatRecipesWriterAhead(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	admin := mustAdmin(t, cli)
	rw := newRWMutex(t, s, "ca", withRecipes)

	fw := rcp.NewRWMutex(cs, fpfx+"ca")
	mustNil(t, fw.Lock(), "recipes Lock")
	rres := lockAsync(ctx, rw.RLocker())
	waitEntries(t, admin, "ca", 2)
	wres := lockAsync(ctx, rw) // behind the reader
	q := waitEntries(t, admin, "ca", 3)
	if q[0].Client != distlock.ClientEtcdRecipes || !q[0].Holding || q[1].Holding || q[2].Holding ||
		q[1].Kind != distlock.Shared || q[2].Kind != distlock.Exclusive {
		t.Errorf("queue %+v; want the recipes writer holding, our reader and writer waiting", q)
	}
	notYet(t, rres, "distlock RLock behind a recipes writer")
	notYet(t, wres, "distlock Lock behind a recipes writer")
	mustNil(t, fw.Unlock(), "recipes Unlock")
	r := recv(t, rres, "distlock RLock after the recipes writer's unlock")
	mustNil(t, r.Err, "RLock")
	notYet(t, wres, "distlock Lock behind a distlock reader")
	mustUnlock(t, r.Lease)
	w := successor(t, wres, r.Lease.Token(), "distlock Lock after the reader's unlock")

	// Our moved writer holds: a reader of the mode, and one without it,
	// wait for it.
	rres = lockAsync(ctx, rw.RLocker())
	rres0 := lockAsync(ctx, newRWMutex(t, s, "ca").RLocker())
	waitEntries(t, admin, "ca", 3) // readers: in either order
	notYet(t, rres, "distlock RLock behind a moved writer")
	notYet(t, rres0, "own-layout RLock behind a moved writer")
	mustUnlock(t, w)
	mustUnlock(t, successor(t, rres, w.Token(), "RLock after the moved writer's unlock"))
	mustUnlock(t, successor(t, rres0, w.Token(), "own-layout RLock after the moved writer's unlock"))
	noKeys(t, cli, "ca")
}

// TestCompatRecipesReadersShare: distlock's readers of the mode and the
// recipes' share the lock, in either order; a writer of either waits for
// both.
func TestCompatRecipesReadersShare(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	admin := mustAdmin(t, cli)
	rw := newRWMutex(t, s, "cr", withRecipes)

	r1 := mustLock(t, rw.RLocker())
	fr := rcp.NewRWMutex(cs, fpfx+"cr")
	if err := recv(t, async(fr.RLock), "recipes RLock beside a distlock reader"); err != nil {
		t.Fatal(err)
	}
	r2 := mustLock(t, rw.RLocker())
	wres := lockAsync(ctx, rw)
	q := waitEntries(t, admin, "cr", 4)
	for i, e := range q {
		if e.Holding != (i < 3) {
			t.Errorf("queue %+v; want three readers holding, the writer waiting", q)
			break
		}
	}
	mustUnlock(t, r1)
	mustUnlock(t, r2)
	notYet(t, wres, "distlock Lock behind a recipes reader")
	mustNil(t, fr.RUnlock(), "recipes RUnlock")
	w := recv(t, wres, "distlock Lock after the readers' unlock")
	mustNil(t, w.Err, "Lock")
	mustUnlock(t, w.Lease)
	noKeys(t, cli, "cr")
}

// TestCompatRecipesTry: TryLock and TryRLock in the mode: refused for a
// conflicting holder of either client, writing nothing, and granted
// beside a reader for a reader.
func TestCompatRecipesTry(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	rw := newRWMutex(t, s, "ct", withRecipes)

	w, err := rw.TryLock(ctx)
	mustNil(t, err, "TryLock of a free lock")
	if _, err := rw.TryRLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryRLock with a moved writer holding: %v, want ErrLocked", err)
	}
	if _, err := newRWMutex(t, s, "ct").TryRLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("own-layout TryRLock with a moved writer holding: %v, want ErrLocked", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with a moved writer holding: %v, want ErrLocked", err)
	}
	mustUnlock(t, w)
	noKeys(t, cli, "ct")

	fr := rcp.NewRWMutex(cs, fpfx+"ct")
	mustNil(t, fr.RLock(), "recipes RLock")
	r, err := rw.TryRLock(ctx)
	mustNil(t, err, "TryRLock beside a recipes reader")
	if _, err := rw.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with readers holding: %v, want ErrLocked", err)
	}
	mustUnlock(t, r)
	mustNil(t, fr.RUnlock(), "recipes RUnlock")

	fw := rcp.NewRWMutex(cs, fpfx+"ct")
	mustNil(t, fw.Lock(), "recipes Lock")
	if _, err := rw.TryRLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryRLock with a recipes writer holding: %v, want ErrLocked", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with a recipes writer holding: %v, want ErrLocked", err)
	}
	mustNil(t, fw.Unlock(), "recipes Unlock")
	noKeys(t, cli, "ct")
}

// TestCompatRecipesSubName: lock "cs/write", in the library's own layout,
// keeps its entries under cs/write/@ beside lock cs's moved writers under
// cs/write/#: the two locks do not wait for each other, and neither's
// inspection lists the other's entries.
func TestCompatRecipesSubName(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	s := newSession(t, cli)
	admin := mustAdmin(t, cli)

	w := mustLock(t, newRWMutex(t, s, "cs", withRecipes))
	sub := newRWMutex(t, s, "cs/write")
	sw, err := sub.TryLock(ctx)
	mustNil(t, err, "TryLock of cs/write beside cs's moved writer")
	if _, err := newRWMutex(t, s, "cs/write").TryRLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryRLock of cs/write beside its own writer: %v, want ErrLocked", err)
	}
	q, err := admin.Inspect(ctx, "cs/write")
	mustNil(t, err, "Inspect cs/write")
	if len(q) != 1 || q[0].Token != sw.Token() || q[0].Client != "" {
		t.Errorf("cs/write's queue %+v; want its writer alone", q)
	}
	q, err = admin.Inspect(ctx, "cs")
	mustNil(t, err, "Inspect cs")
	if len(q) != 1 || q[0].Token != w.Token() || q[0].Client != "" || !q[0].Holding {
		t.Errorf("cs's queue %+v; want its moved writer alone", q)
	}
	mustUnlock(t, sw)
	// A waiter of cs/write is not held up by cs's writer.
	l := mustLock(t, sub)
	mustUnlock(t, l)
	mustUnlock(t, w)
	noKeys(t, cli, "cs")
}

// TestCompatEtcdMutex: a Mutex in CompatEtcd and etcd's concurrency.Mutex
// and v3lock service (etcdctl lock) exclude each other both ways, with
// the library's keys unchanged.
func TestCompatEtcdMutex(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	cs := concSession(t, cli)
	s := newSession(t, cli)
	admin := mustAdmin(t, cli)
	m, err := recipe.NewMutex(s, "ce", distlock.WithCompat(distlock.CompatEtcd))
	mustNil(t, err, "NewMutex in CompatEtcd")

	// distlock holds: etcd's Mutex waits.
	l := mustLock(t, m)
	if keys := queueKeys(t, cli, "ce"); len(keys) != 1 || !strings.HasPrefix(keys[0], fpfx+"ce/@w") {
		t.Errorf("queue keys %v; want our entry in its own layout", keys)
	}
	fm := concurrency.NewMutex(cs, fpfx+"ce")
	fres := async(func() error { return fm.Lock(ctx) })
	waitEntries(t, admin, "ce", 2)
	notYet(t, fres, "concurrency.Mutex behind a distlock holder")
	mustUnlock(t, l)
	mustNil(t, recv(t, fres, "concurrency.Mutex after the distlock unlock"), "concurrency Lock")

	// etcd's Mutex holds: distlock waits.
	res := lockAsync(ctx, m)
	waitEntries(t, admin, "ce", 2)
	notYet(t, res, "distlock Lock behind a concurrency.Mutex")
	mustNil(t, fm.Unlock(ctx), "concurrency Unlock")
	r := recv(t, res, "distlock Lock after the concurrency unlock")
	mustNil(t, r.Err, "Lock")

	// distlock holds: a v3lock Lock (etcdctl lock) waits.
	lease, err := cli.Grant(ctx, 30)
	mustNil(t, err, "Grant")
	defer cli.Revoke(context.Background(), lease.ID)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	type locked struct {
		resp *v3lockpb.LockResponse
		err  error
	}
	vres := make(chan locked, 1)
	go func() {
		resp, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(fpfx + "ce"), Lease: int64(lease.ID)})
		vres <- locked{resp, err}
	}()
	waitEntries(t, admin, "ce", 2)
	notYet(t, vres, "v3lock Lock behind a distlock holder")
	mustUnlock(t, r.Lease)
	v := recv(t, vres, "v3lock Lock after the distlock unlock")
	mustNil(t, v.err, "v3lock Lock")

	// v3lock holds: distlock waits.
	res = lockAsync(ctx, m)
	waitEntries(t, admin, "ce", 2)
	notYet(t, res, "distlock Lock behind a v3lock holder")
	_, err = lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: v.resp.Key})
	mustNil(t, err, "v3lock Unlock")
	r = recv(t, res, "distlock Lock after the v3lock unlock")
	mustNil(t, r.Err, "Lock")

	// A second Lock of the same session waits, where etcd's Mutex on one
	// session would reuse its key.
	m2, err := recipe.NewMutex(s, "ce", distlock.WithCompat(distlock.CompatEtcd))
	mustNil(t, err, "NewMutex in CompatEtcd")
	res = lockAsync(ctx, m2)
	waitEntries(t, admin, "ce", 2)
	notYet(t, res, "a second Lock of the session")
	mustUnlock(t, r.Lease)
	mustUnlock(t, successor(t, res, r.Lease.Token(), "the second Lock"))
	noKeys(t, cli, "ce")
}

// TestCompatEtcdRefused: the modes etcd does not offer for a recipe are
// refused by its constructor, with errors.ErrUnsupported.
func TestCompatEtcdRefused(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	s := newSession(t, cli)
	for _, c := range []struct {
		what string
		err  error
	}{
		{"Mutex CompatCurator", func() error {
			_, err := recipe.NewMutex(s, "cx", distlock.WithCompat(distlock.CompatCurator))
			return err
		}()},
		{"RWMutex CompatKazoo", func() error {
			_, err := recipe.NewRWMutex(s, "cx", distlock.WithCompat(distlock.CompatKazoo))
			return err
		}()},
		{"Mutex CompatEtcdRecipes", func() error {
			_, err := recipe.NewMutex(s, "cx", withRecipes)
			return err
		}()},
		{"RWMutex CompatEtcd", func() error {
			_, err := recipe.NewRWMutex(s, "cx", distlock.WithCompat(distlock.CompatEtcd))
			return err
		}()},
		{"Election CompatCuratorLatch", func() error {
			_, err := recipe.NewElection(s, "cx", distlock.WithElectionCompat(distlock.CompatCuratorLatch))
			return err
		}()},
	} {
		if !errors.Is(c.err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want errors.ErrUnsupported", c.what, c.err)
		}
	}
	if _, err := recipe.NewMutex(s, "cx", distlock.WithCompat("nope")); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("an unknown mode: %v, want ErrInvalidOption", err)
	}
}

// TestCompatRecipesMovedWriterLife: a moved writer's release is told by
// its release mark (a waiter with a lock-delay far longer than the test
// takes the lock at once), and a forced revoke deletes the moved key,
// ending the holder's Lease and letting a recipes reader in.
func TestCompatRecipesMovedWriterLife(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	s := newSession(t, cli, recipe.WithLockDelay(time.Hour))
	s2 := newSession(t, cli, recipe.WithLockDelay(time.Hour))
	admin := mustAdmin(t, cli)

	w := mustLock(t, newRWMutex(t, s, "cl", withRecipes))
	rres := lockAsync(ctx, newRWMutex(t, s2, "cl", withRecipes).RLocker())
	waitEntries(t, admin, "cl", 2)
	notYet(t, rres, "RLock behind a moved writer")
	mustUnlock(t, w)
	r := successor(t, rres, w.Token(), "RLock after the moved writer's unlock, no delay")
	mustUnlock(t, r)

	w = mustLock(t, newRWMutex(t, s, "cl", withRecipes))
	revs, err := admin.Revoke(ctx, "cl", distlock.RevokeRequest{Reason: "test", Force: true})
	mustNil(t, err, "Revoke")
	if len(revs) != 1 || !strings.HasPrefix(revs[0].Key, fpfx+"cl/write/#w") {
		t.Errorf("revocations %+v; want the moved writer's", revs)
	}
	recv(t, w.Done(), "the revoked writer's Lease ending")
	cs := concSession(t, cli)
	fr := rcp.NewRWMutex(cs, fpfx+"cl")
	if err := recv(t, async(fr.RLock), "recipes RLock after the revoke"); err != nil {
		t.Fatal(err)
	}
	mustNil(t, fr.RUnlock(), "recipes RUnlock")
	noKeys(t, cli, "cl")
}
