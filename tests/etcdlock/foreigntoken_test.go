package etcdlock_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestForeignToken fences the holders of one lock made by etcd's own
// concurrency.Mutex and by distlock with one etcdfence.Fence: each
// holder's token is admitted in the order they held, and the older one is
// refused once a newer one was admitted.
func TestForeignToken(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	const name = "ledger"

	newForeign := func(t *testing.T) (*concurrency.Session, *concurrency.Mutex) {
		t.Helper()
		cs, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs, concurrency.NewMutex(cs, etcdlock.DefaultPrefix+name)
	}
	newFence := func(t *testing.T) *etcdfence.Fence {
		t.Helper()
		f, err := etcdfence.New(cli, "/fences/"+t.Name(), name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	inspect := func(t *testing.T, key string, want distlock.Token) {
		t.Helper()
		admin, err := etcdlock.NewAdmin(cli, "")
		if err != nil {
			t.Fatal(err)
		}
		q, err := admin.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range q {
			if e.Key == key {
				if e.Token != want {
					t.Errorf("Inspect lists %s with token %v, the helper says %v", key, e.Token, want)
				}
				return
			}
		}
		t.Logf("Inspect does not list the foreign entry %s", key)
	}

	t.Run("ForeignThenDistlock", func(t *testing.T) {
		fence := newFence(t)
		cs, m := newForeign(t)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ftok, err := etcdlock.MutexToken(ctx, cs, m, etcdlock.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}
		get, err := cli.Get(ctx, m.Key())
		if err != nil || len(get.Kvs) != 1 {
			t.Fatalf("read %s: %v %v", m.Key(), get, err)
		}
		want := distlock.Token{Name: name, Seq: get.Kvs[0].CreateRevision, Owner: uint64(cs.Lease())}
		if ftok != want {
			t.Fatalf("MutexToken = %v, want %v", ftok, want)
		}
		if etok, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, m.Key()); err != nil || etok != ftok {
			t.Fatalf("EntryToken(%s) = %v, %v; want %v", m.Key(), etok, err, ftok)
		}
		inspect(t, m.Key(), ftok)
		// The foreign holder writes through the fence, its key checked in
		// the same Txn as for any distlock holder.
		if _, err := fence.WriteHeld(ctx, ftok, m.Key(), clientv3.OpPut("/data/"+t.Name(), "foreign")); err != nil {
			t.Fatalf("foreign holder's write: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := etcdlock.MutexToken(ctx, cs, m, etcdlock.DefaultPrefix); !errors.Is(err, etcdlock.ErrNoEntry) {
			t.Errorf("MutexToken after Unlock: %v, want ErrNoEntry", err)
		}
		if _, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, etcdlock.DefaultPrefix+name+"/"+strconv.FormatInt(int64(cs.Lease()), 16)); !errors.Is(err, etcdlock.ErrNoEntry) {
			t.Errorf("EntryToken after Unlock: %v, want ErrNoEntry", err)
		}

		s := newSession(t, cli)
		l := mustLock(t, newMutex(t, s, name))
		defer mustUnlock(t, l)
		if !l.Token().Newer(ftok) {
			t.Fatalf("distlock's token %v is not newer than the foreign one %v", l.Token(), ftok)
		}
		if err := fence.Admit(ctx, l.Token()); err != nil {
			t.Fatalf("distlock holder refused: %v", err)
		}
		var stale *fencing.StaleError
		if err := fence.Admit(ctx, ftok); !errors.As(err, &stale) || stale.Newest != l.Token() {
			t.Fatalf("stale foreign token: %v, want a StaleError naming %v", err, l.Token())
		}
	})

	t.Run("DistlockThenForeign", func(t *testing.T) {
		// etcd's Mutex waits for every key under the lock's prefix with
		// a lower create revision, distlock's among them.
		fence := newFence(t)
		s := newSession(t, cli)
		l := mustLock(t, newMutex(t, s, name))
		if err := fence.Admit(ctx, l.Token()); err != nil {
			t.Fatal(err)
		}
		cs, m := newForeign(t)
		key := etcdlock.DefaultPrefix + name + "/" + strconv.FormatInt(int64(cs.Lease()), 16)
		w := cli.Watch(ctx, key, clientv3.WithCreatedNotify())
		if r := <-w; !r.Created {
			t.Fatalf("watch %s: %v", key, r.Err())
		}
		locked := make(chan error, 1)
		go func() { locked <- m.Lock(ctx) }()
		for put := false; !put; {
			r, ok := <-w
			if !ok {
				t.Fatalf("watch %s closed: %v", key, ctx.Err())
			}
			for _, ev := range r.Events {
				put = put || ev.Type == clientv3.EventTypePut
			}
		}
		select {
		case err := <-locked:
			t.Fatalf("concurrency.Mutex locked (%v) while distlock holds", err)
		default:
		}
		if _, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, key); err != nil {
			t.Fatalf("a waiting entry's token: %v", err)
		}
		mustUnlock(t, l)
		if err := recv(t, locked, "concurrency.Mutex Lock"); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(ctx)
		ftok, err := etcdlock.MutexToken(ctx, cs, m, etcdlock.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if ftok.Seq == m.Header().Revision {
			t.Errorf("token %v carries the acquiring read's revision %d, not the key's", ftok, m.Header().Revision)
		}
		if err := fence.Admit(ctx, ftok); err != nil {
			t.Fatalf("foreign holder after distlock refused: %v", err)
		}
		if err := fence.Admit(ctx, l.Token()); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("distlock's stale token: %v, want ErrStale", err)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		cs, m := newForeign(t)
		if _, err := etcdlock.MutexToken(ctx, cs, m, etcdlock.DefaultPrefix); !errors.Is(err, etcdlock.ErrNoEntry) {
			t.Errorf("MutexToken before Lock: %v, want ErrNoEntry", err)
		}
		if _, err := etcdlock.EntryToken(ctx, cli, "/other/", etcdlock.DefaultPrefix+name+"/1"); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("key outside the prefix: %v, want ErrInvalidName", err)
		}
		if _, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, etcdlock.DefaultPrefix+name); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("key of no layout: %v, want ErrInvalidName", err)
		}
		plain := etcdlock.DefaultPrefix + name + "/1f"
		if _, err := cli.Put(ctx, plain, ""); err != nil {
			t.Fatal(err)
		}
		defer cli.Delete(ctx, plain)
		if _, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, plain); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("key without lease: %v, want ErrInvalidToken", err)
		}
		if _, err := etcdlock.EntryToken(ctx, nil, etcdlock.DefaultPrefix, plain); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("nil client: %v, want ErrNilClient", err)
		}
	})
}

// TestForeignTokenNames reads lock names off the keys of every layout
// EntryToken knows: etcd's own (the lease in hex), the recipes' RWMutex,
// and distlock's.
func TestForeignTokenNames(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	hex := strconv.FormatInt(int64(lease.ID), 16)
	for key, name := range map[string]string{
		"a/" + hex:                    "a",
		"reports/daily/" + hex:        "reports/daily",
		"x/write/" + hex:              "x/write",
		"x/write/1765000000000000000": "x",
		"x/read/1765000000000000001":  "x",
		"y/@w" + hex + "_1":           "y",
	} {
		key = etcdlock.DefaultPrefix + key
		put, err := cli.Put(ctx, key, "", clientv3.WithLease(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		got, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, key)
		want := distlock.Token{Name: name, Seq: put.Header.Revision, Owner: uint64(lease.ID)}
		if err != nil || got != want {
			t.Errorf("EntryToken(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	other := etcdlock.DefaultPrefix + "z/" + strconv.FormatInt(int64(lease.ID)+1, 16)
	if _, err := cli.Put(ctx, other, "", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdlock.EntryToken(ctx, cli, etcdlock.DefaultPrefix, other); !errors.Is(err, distlock.ErrInvalidToken) {
		t.Errorf("key naming another lease: %v, want ErrInvalidToken", err)
	}
}
