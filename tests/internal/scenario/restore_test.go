package scenario_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/sqlfence"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Two acquisitions with one sequence number: a cluster rebuilt from
// scratch, or restored from a backup, issues a number again. These tests
// make it happen on real servers — the new holder's token has exactly the
// old holder's Seq — and check that no fence admits the writes of both:
// whichever of the two comes second is refused as a fork, also when it is
// the old holder's late write. With the revision bumped at restore
// (etcdutl snapshot restore --bump-revision), the new tokens are newer
// and the old holder is refused as stale: normal operation.

const restoreLock = "ledger"

// restoreCtx is a context for one restore test.
func restoreCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// restoreFences are the resources the holders write to: they live outside
// the cluster that is rebuilt or restored (a fence kept in that cluster is
// rolled back with it).
type restoreFence struct {
	name string
	new  func(t *testing.T, resource string) fencing.Fence
}

func restoreFences(t *testing.T) []restoreFence {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(t.TempDir(), "fence.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	setup, err := sqlfence.New(sqlfence.DefaultTable, "setup", restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.CreateTable(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return []restoreFence{
		{"memory", func(t *testing.T, _ string) fencing.Fence {
			f, err := fencing.NewMemory(restoreLock)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{"sqlite", func(t *testing.T, resource string) fencing.Fence {
			f, err := sqlfence.New(sqlfence.DefaultTable, resource, restoreLock)
			if err != nil {
				t.Fatal(err)
			}
			return f.In(db)
		}},
	}
}

// sqliteDSN is the DSN of a SQLite file written by one process: writers
// wait for each other instead of failing with SQLITE_BUSY.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// checkForked checks two acquisitions' tokens with one Seq against every
// fence kind, in both orders: the first token written is admitted (and
// again, as a retry), the second is refused with a *fencing.ForkError
// naming both, every time.
func checkForked(t *testing.T, older, newer distlock.Token) {
	t.Helper()
	if older.Seq != newer.Seq || older.Name != newer.Name || older.Owner == newer.Owner {
		t.Fatalf("tokens %v and %v are not two acquisitions with one sequence number", older, newer)
	}
	if _, err := older.Compare(newer); !errors.Is(err, distlock.ErrTokenFork) {
		t.Errorf("%v.Compare(%v) = %v, want ErrTokenFork", older, newer, err)
	}
	ctx := restoreCtx(t)
	for _, fk := range restoreFences(t) {
		for _, order := range [][2]distlock.Token{{older, newer}, {newer, older}} {
			first, second := order[0], order[1]
			f := fk.new(t, fmt.Sprintf("%s-first-%x", t.Name(), first.Owner))
			for round := range 2 {
				if err := f.Admit(ctx, first); err != nil {
					t.Fatalf("%s fence: round %d: %v written first: %v", fk.name, round, first, err)
				}
				err := f.Admit(ctx, second)
				var fork *fencing.ForkError
				if !errors.As(err, &fork) || !errors.Is(err, fencing.ErrFork) || fork.Token != second || fork.Admitted != first {
					t.Fatalf("%s fence: round %d: %v after %v: %v, want a *ForkError naming both", fk.name, round, second, first, err)
				}
				if round == 0 {
					t.Logf("%s fence refused: %v", fk.name, err)
				}
			}
		}
	}
}

// checkNewer checks that the fences admit newer, then refuse older as
// stale: the old holder's late write after a restore that moved the
// revisions on.
func checkNewer(t *testing.T, older, newer distlock.Token) {
	t.Helper()
	if !newer.Newer(older) {
		t.Fatalf("token %v is not newer than %v", newer, older)
	}
	ctx := restoreCtx(t)
	for _, fk := range restoreFences(t) {
		f := fk.new(t, t.Name()+"-newer")
		if err := f.Admit(ctx, older); err != nil {
			t.Fatalf("%s fence: %v: %v", fk.name, older, err)
		}
		if err := f.Admit(ctx, newer); err != nil {
			t.Fatalf("%s fence: %v after %v: %v", fk.name, newer, older, err)
		}
		var stale *fencing.StaleError
		if err := f.Admit(ctx, older); !errors.As(err, &stale) || stale.Newest != newer {
			t.Fatalf("%s fence: %v after %v: %v, want a *StaleError", fk.name, older, newer, err)
		}
	}
}

// closeSoon closes a session, giving up after a few seconds: after a
// restore its server may refuse it or have forgotten it.
func closeSoon(s interface{ Close(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Close(ctx)
}

// etcdLock acquires the restore lock on a new session of cli.
func etcdLock(ctx context.Context, t *testing.T, cli *clientv3.Client) distlock.Token {
	t.Helper()
	s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeSoon(s) })
	mu, err := recipe.NewMutex(s, restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok := l.Token(); tok.Owner != uint64(s.ID()) {
		t.Fatalf("token %v does not name the session's lease %x", tok, int64(s.ID()))
	}
	return l.Token()
}

// etcdPadTo writes a padding key until the cluster's revision is rev, so
// that the next write (an enqueue) gets revision rev+1.
func etcdPadTo(ctx context.Context, t *testing.T, cli *clientv3.Client, rev int64) {
	t.Helper()
	resp, err := cli.Get(ctx, "/pad")
	if err != nil {
		t.Fatal(err)
	}
	cur := resp.Header.Revision
	if cur > rev {
		t.Fatalf("the cluster is at revision %d already, past %d", cur, rev)
	}
	for cur < rev {
		p, err := cli.Put(ctx, "/pad", fmt.Sprint(cur))
		if err != nil {
			t.Fatal(err)
		}
		cur = p.Header.Revision
	}
}

// TestEtcdClusterRebuilt: lock L on cluster 1, then on a fresh cluster 2
// that is as young as cluster 1 was: the same Seq, another owner.
func TestEtcdClusterRebuilt(t *testing.T) {
	ctx := restoreCtx(t)
	one := integration.NewEtcd(t, integration.WithSize(1))
	cli1, err := one.Client()
	if err != nil {
		t.Fatal(err)
	}
	old := etcdLock(ctx, t, cli1)

	two := integration.NewEtcd(t, integration.WithSize(1))
	cli2, err := two.Client()
	if err != nil {
		t.Fatal(err)
	}
	etcdPadTo(ctx, t, cli2, old.Seq-1)
	fresh := etcdLock(ctx, t, cli2)
	t.Logf("cluster 1 issued %v, the rebuilt cluster %v", old, fresh)
	checkForked(t, old, fresh)
}

// TestEtcdRestoredFromSnapshot: a snapshot, then lock L; the cluster is
// restored from the snapshot with etcdutl, and L is locked again by
// another session. Without --bump-revision the new token has the old Seq
// and the fences refuse one of the two; with it the new token is newer
// and the old holder's late write is stale.
func TestEtcdRestoredFromSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    integration.EtcdRestore
		// same: the old holder's session, which lived through the
		// restore, locks again instead of a new one.
		same bool
	}{
		{"NoBump", integration.EtcdRestore{}, false},
		{"NoBumpSameSession", integration.EtcdRestore{}, true},
		{"BumpRevision", integration.EtcdRestore{BumpRevision: 1_000_000, MarkCompacted: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := restoreCtx(t)
			c := integration.NewEtcd(t, integration.WithSize(1))
			cli, err := c.Client()
			if err != nil {
				t.Fatal(err)
			}
			// The old holder's session exists before the snapshot, so the
			// restore brings its lease back (its key, written after, not).
			s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer closeSoon(s)
			for i := range 5 {
				if _, err := cli.Put(ctx, fmt.Sprintf("/before/%d", i), "x"); err != nil {
					t.Fatal(err)
				}
			}
			snap := filepath.Join(t.TempDir(), "snapshot.db")
			if _, err := c.SaveSnapshot(ctx, 0, snap); err != nil {
				t.Fatal(err)
			}
			mu, err := recipe.NewMutex(s, restoreLock)
			if err != nil {
				t.Fatal(err)
			}
			l, err := mu.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			old := l.Token()

			if err := c.RestoreSnapshot(ctx, snap, tc.r); err != nil {
				t.Fatal(err)
			}
			// The old holder's key is gone with the restore; its lease is
			// back (granted before the snapshot).
			resp, err := cli.Get(ctx, etcdlock.DefaultPrefix+restoreLock+"/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 0 {
				t.Fatalf("after the restore the lock has %d entries, want none", len(resp.Kvs))
			}
			if tc.r.BumpRevision == 0 {
				etcdPadTo(ctx, t, cli, old.Seq-1)
			}
			if tc.same {
				// Its next key gets the old key's revision, and would
				// carry the old token again: the session ends instead,
				// and leaves nothing behind.
				_, err := mu.Lock(ctx)
				if !errors.Is(err, distlock.ErrHistoryRewound) {
					t.Fatalf("the surviving session locks again: %v, want ErrHistoryRewound", err)
				}
				t.Logf("the surviving session refused: %v", err)
				select {
				case <-l.Done():
				case <-ctx.Done():
					t.Fatal("the old lease is not lost after the session ended")
				}
				if !errors.Is(l.Err(), distlock.ErrLost) || !errors.Is(l.Err(), distlock.ErrHistoryRewound) {
					t.Errorf("the old lease ended with %v, want ErrLost and ErrHistoryRewound", l.Err())
				}
				if !errors.Is(s.Err(), distlock.ErrHistoryRewound) {
					t.Errorf("session error %v, want ErrHistoryRewound", s.Err())
				}
				resp, err := cli.Get(ctx, etcdlock.DefaultPrefix+restoreLock+"/", clientv3.WithPrefix())
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Kvs) != 0 {
					t.Fatalf("after the refusal the lock has %d entries, want none", len(resp.Kvs))
				}
				// Another session goes on with the next revisions.
				fresh := etcdLock(ctx, t, cli)
				if !fresh.Newer(old) {
					t.Fatalf("token %v after %v", fresh, old)
				}
				return
			}
			fresh := etcdLock(ctx, t, cli)
			t.Logf("before the restore %v, after it %v", old, fresh)
			if tc.r.BumpRevision == 0 {
				checkForked(t, old, fresh)
				return
			}
			if fresh.Seq <= old.Seq+int64(tc.r.BumpRevision)-1 {
				t.Errorf("token %v after a bump of %d over %v", fresh, tc.r.BumpRevision, old)
			}
			checkNewer(t, old, fresh)
		})
	}
}

// TestZooKeeperRestoredFromCopy: a copy of a stopped server's data
// directory, then lock L; the server is stopped, the copy put back, the
// server started again, and L is locked by a new session. Its czxid is
// the old holder's (the test writes a padding node until the zxid is just
// below it), its session another: the fences refuse one of the two.
func TestZooKeeperRestoredFromCopy(t *testing.T) {
	ctx := restoreCtx(t)
	ens := integration.NewZooKeeper(t, integration.WithSize(1))
	backup := filepath.Join(t.TempDir(), "backup")

	// One acquisition before the backup creates the lock's directories.
	conn0, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s0, err := zklock.NewSession(ctx, conn0)
	if err != nil {
		t.Fatal(err)
	}
	mu0, err := recipe.NewMutex(s0, restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu0.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	s0.Close(ctx)
	conn0.Close()
	if err := ens.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := ens.SaveData(0, backup); err != nil {
		t.Fatal(err)
	}
	if err := ens.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// The old holder's session starts after the backup.
	connA, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sA, err := zklock.NewSession(ctx, connA)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSoon(sA)
	muA, err := recipe.NewMutex(sA, restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	// Other writes after the backup, before the old holder's: room for
	// the new session and the padding of the restored history.
	for i := range 20 {
		if _, err := connA.Create(fmt.Sprintf("/after-%d", i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	l, err = muA.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Token()
	if old.Owner != uint64(sA.ID()) {
		t.Fatalf("token %v does not name the session %x", old, sA.ID())
	}

	// Restore until the new holder's czxid is the old one's: the padding
	// aims at the zxid below it; a transaction the test does not control
	// (a session expiring, the lock's directory created again) can make
	// the create land later, and then the next try aims that much lower.
	var fresh distlock.Token
	extra := int64(0)
	for try := 1; ; try++ {
		if err := ens.Kill(0); err != nil {
			t.Fatal(err)
		}
		if err := ens.RestoreData(0, backup); err != nil {
			t.Fatal(err)
		}
		if err := ens.Restart(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// A new connection: one that has seen the old history's zxids
		// is refused by the restored server until it catches up.
		connB, _, err := ens.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sB, err := zklock.NewSession(ctx, connB)
		if err != nil {
			t.Fatal(err)
		}
		target := old.Seq - 1 - extra
		zkPadTo(t, connB, fmt.Sprintf("/pad-%d", try), target)
		muB, err := recipe.NewMutex(sB, restoreLock)
		if err != nil {
			t.Fatal(err)
		}
		lB, err := muB.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh = lB.Token()
		if fresh.Owner != uint64(sB.ID()) {
			t.Fatalf("token %v does not name the session %x", fresh, sB.ID())
		}
		if fresh.Seq == old.Seq {
			break
		}
		t.Logf("try %d: the new holder's czxid is %#x, the old one's %#x", try, fresh.Seq, old.Seq)
		if try == 4 {
			t.Fatalf("after %d restores no acquisition with the old czxid %#x", try, old.Seq)
		}
		extra += fresh.Seq - (target + 1)
		sB.Close(ctx)
		connB.Close()
	}
	t.Logf("before the restore %v, after it %v", old, fresh)
	checkForked(t, old, fresh)
}

// zkPadTo writes node p until the zxid of the last write is zxid, so that
// the next transaction gets zxid+1.
func zkPadTo(t *testing.T, conn *zk.Conn, p string, zxid int64) {
	t.Helper()
	if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, stat, err := conn.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	cur := stat.Mzxid
	if cur > zxid {
		t.Fatalf("the server is at zxid %#x already, past %#x", cur, zxid)
	}
	for cur < zxid {
		stat, err := conn.Set(p, []byte(fmt.Sprint(cur)), -1)
		if err != nil {
			t.Fatal(err)
		}
		cur = stat.Mzxid
	}
}

// TestZooKeeperRestoredWithEpochBump is the ZooKeeper counterpart of
// --bump-revision, the procedure in docs/operations.md: a 3-server
// ensemble is restored from copies of its data directories, with
// acceptedEpoch and currentEpoch raised to the epoch the old ensemble had
// reached before it starts again. The new holder's czxid is then above the
// old holder's, and the old holder's late write is refused as stale.
func TestZooKeeperRestoredWithEpochBump(t *testing.T) {
	ctx := restoreCtx(t)
	ens := integration.NewZooKeeper(t)
	n := len(ens.Servers)
	backup := t.TempDir()
	killAll := func() {
		t.Helper()
		for i := range n {
			if err := ens.Kill(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	restartAll := func() {
		t.Helper()
		for i := range n {
			if err := ens.Restart(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := ens.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}

	killAll()
	for i := range n {
		if err := ens.SaveData(i, filepath.Join(backup, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	restartAll()
	connA, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sA, err := zklock.NewSession(ctx, connA)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSoon(sA)
	muA, err := recipe.NewMutex(sA, restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := muA.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Token()

	killAll()
	for i := range n {
		if err := ens.RestoreData(i, filepath.Join(backup, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		// The epoch the old ensemble reached: the top 32 bits of its
		// last zxid (here the old holder's czxid).
		if err := ens.SetEpoch(i, old.Seq>>32); err != nil {
			t.Fatal(err)
		}
	}
	restartAll()
	connB, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sB, err := zklock.NewSession(ctx, connB)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSoon(sB)
	muB, err := recipe.NewMutex(sB, restoreLock)
	if err != nil {
		t.Fatal(err)
	}
	lB, err := muB.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fresh := lB.Token()
	t.Logf("before the restore %v (epoch %d), after it %v (epoch %d)", old, old.Seq>>32, fresh, fresh.Seq>>32)
	checkNewer(t, old, fresh)
}
