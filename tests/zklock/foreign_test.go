package zklock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// The safety floor: other clients' lock and election recipes sharing a
// lock's directory (go-zookeeper's zk.Lock for real; Curator's and
// kazoo's by the names they make) are waited for, and an unknown one's
// entries are reported.

// Foreign names, as their clients make them (before ZooKeeper's suffix).
const (
	curatorUUID = "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b"
	kazooHex    = "0123456789abcdef0123456789abcdef"
)

// notAcquired fails if the background Lock returns within d: a negative
// check, so it can only wait.
func notAcquired(t *testing.T, what string, d time.Duration, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: acquired while a foreign entry is ahead (err %v)", what, r.Err)
	case <-time.After(d):
	}
}

// foreignNode creates an ephemeral sequential node dir/base<seq> on conn,
// as a foreign client would (its parents made first), and returns its
// path.
func foreignNode(t *testing.T, conn *zk.Conn, dir, base string) string {
	t.Helper()
	mkdirs(t, conn, dir)
	p, err := conn.Create(dir+"/"+base, []byte("foreign "+base), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("create %s/%s: %v", dir, base, err)
	}
	return p
}

func mkdirs(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	p := ""
	for _, seg := range strings.Split(dir, "/")[1:] {
		p += "/" + seg
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// noEphemerals fails if any child of dir is left: every entry, distlock's
// and the foreign ones, went with its release or session.
func noEphemerals(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	if _, err := conn.Sync(dir); err != nil {
		t.Fatal(err)
	}
	kids, _, err := conn.Children(dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	for _, k := range kids {
		_, st, err := conn.Exists(dir + "/" + k)
		if err == nil && st != nil && st.EphemeralOwner != 0 {
			t.Errorf("%s/%s left behind (session %#x)", dir, k, st.EphemeralOwner)
		}
	}
}

// queueEntry returns the entry of q with key's base name as its own.
func queueEntry(q []distlock.QueueEntry, key string) (distlock.QueueEntry, bool) {
	for _, e := range q {
		if path.Base(e.Key) == path.Base(key) {
			return e, true
		}
	}
	return distlock.QueueEntry{}, false
}

func TestForeignZkLock(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	session := func(t *testing.T, prefix string, i int) (*zk.Conn, *recipe.Mutex, *recipe.RWMutex) {
		conn, events := connect(t, ens, i%3)
		drain(events)
		s := newSession(t, conn, recipe.WithPrefix(prefix))
		rw, err := recipe.NewRWMutex(s, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return conn, newMutex(t, s, "jobs"), rw
	}

	// A distlock locker behind a real zk.Lock waits for its Unlock.
	for _, c := range []struct {
		what string
		take func(m *recipe.Mutex, rw *recipe.RWMutex) distlock.Locker
	}{
		{"Mutex", func(m *recipe.Mutex, _ *recipe.RWMutex) distlock.Locker { return m }},
		{"Writer", func(_ *recipe.Mutex, rw *recipe.RWMutex) distlock.Locker { return rw }},
		{"Reader", func(_ *recipe.Mutex, rw *recipe.RWMutex) distlock.Locker { return rw.RLocker() }},
	} {
		t.Run(c.what, func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/jobs"
			zconn, events := connect(t, ens, 1)
			drain(events)
			zl := zk.NewLock(zconn, dir, zk.WorldACL(zk.PermAll))
			if err := zl.Lock(); err != nil {
				t.Fatal(err)
			}
			_, m, rw := session(t, prefix, 0)
			res := lockAsync(testCtx(t), c.take(m, rw))
			waitEntries(t, admin, dir, 1)
			q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), "jobs")
			if err != nil {
				t.Fatal(err)
			}
			if len(q) != 2 || q[0].Client != distlock.ClientGoZookeeper || !q[0].Holding || q[0].Position != 1 ||
				q[1].Client != "" || q[1].Holding || q[1].Position != 2 {
				t.Fatalf("queue: %+v; want zk.Lock's entry holding, then distlock's waiting", q)
			}
			if q[0].Owner != strconv.FormatInt(zconn.SessionID(), 16) || q[0].Token.Owner != uint64(zconn.SessionID()) {
				t.Errorf("zk.Lock's entry: owner %s, token %v; want session %#x", q[0].Owner, q[0].Token, zconn.SessionID())
			}
			if q[0].Token.Seq >= q[1].Token.Seq {
				t.Errorf("zk.Lock's token %v not before distlock's %v", q[0].Token, q[1].Token)
			}
			notAcquired(t, "behind zk.Lock", 300*time.Millisecond, res)
			if err := zl.Unlock(); err != nil {
				t.Fatal(err)
			}
			r := recv(t, res, "the lock after zk.Lock's Unlock")
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Lease.Token().Seq <= q[0].Token.Seq {
				t.Errorf("token %v not after zk.Lock's %v", r.Lease.Token(), q[0].Token)
			}
			mustUnlock(t, r.Lease)
			noEphemerals(t, admin, dir)
		})
	}

	t.Run("TryLock", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		zconn, events := connect(t, ens, 2)
		drain(events)
		zl := zk.NewLock(zconn, dir, zk.WorldACL(zk.PermAll))
		if err := zl.Lock(); err != nil {
			t.Fatal(err)
		}
		_, m, rw := session(t, prefix, 1)
		for what, l := range map[string]func(context.Context) (*distlock.Lease, error){"Mutex": m.TryLock, "RWMutex": rw.TryLock, "RLock": rw.TryRLock} {
			if _, err := l(testCtx(t)); !errors.Is(err, distlock.ErrLocked) {
				t.Errorf("%s.TryLock while zk.Lock holds: %v, want ErrLocked", what, err)
			}
		}
		if err := zl.Unlock(); err != nil {
			t.Fatal(err)
		}
		l, err := m.TryLock(testCtx(t))
		if err != nil {
			t.Fatalf("TryLock after zk.Lock's Unlock: %v", err)
		}
		mustUnlock(t, l)
		noEphemerals(t, admin, dir)
	})
}

func TestForeignNames(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	fconn, events := connect(t, ens, 2)
	drain(events)
	newLockers := func(t *testing.T, prefix string, opts ...recipe.Option) (*recipe.Mutex, *recipe.RWMutex) {
		conn, events := connect(t, ens, 0)
		drain(events)
		s := newSession(t, conn, append([]recipe.Option{recipe.WithPrefix(prefix)}, opts...)...)
		rw, err := recipe.NewRWMutex(s, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return newMutex(t, s, "jobs"), rw
	}

	// Exclusive foreign entries: every locker waits for them.
	for what, base := range map[string]string{
		"CuratorMutex":     "_c_" + curatorUUID + "-lock-",
		"CuratorPlain":     "lock-",
		"CuratorWriter":    "x__WRIT__",
		"KazooLock":        kazooHex + "__lock__",
		"GoZookeeperNames": "", // CreateProtectedEphemeralSequential's own naming
	} {
		t.Run(what, func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/jobs"
			var node string
			if base == "" {
				mkdirs(t, fconn, dir)
				var err error
				if node, err = fconn.CreateProtectedEphemeralSequential(dir+"/lock-", nil, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			} else {
				node = foreignNode(t, fconn, dir, base)
			}
			m, rw := newLockers(t, prefix)
			if _, err := m.TryLock(testCtx(t)); !errors.Is(err, distlock.ErrLocked) {
				t.Errorf("TryLock behind %s: %v, want ErrLocked", node, err)
			}
			wres := lockAsync(testCtx(t), m)
			waitEntries(t, admin, dir, 1)
			rres := lockAsync(testCtx(t), rw.RLocker())
			waitEntries(t, admin, dir, 2)
			// A data change on a foreign entry is no release.
			notAcquired(t, "writer behind "+node, 100*time.Millisecond, wres)
			if _, err := fconn.Set(node, []byte("changed"), -1); err != nil {
				t.Fatal(err)
			}
			notAcquired(t, "writer behind "+node, 300*time.Millisecond, wres)
			if err := fconn.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			w := recv(t, wres, "the lock after the foreign entry's deletion")
			if w.Err != nil {
				t.Fatal(w.Err)
			}
			notAcquired(t, "reader behind the writer", 100*time.Millisecond, rres)
			mustUnlock(t, w.Lease)
			r := recv(t, rres, "the read lock")
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			mustUnlock(t, r.Lease)
			noEphemerals(t, admin, dir)
		})
	}

	// Shared foreign entries: readers pass, writers wait.
	for what, base := range map[string]string{
		"CuratorReader": "_c_" + curatorUUID + "-__READ__",
		"KazooReader":   kazooHex + "__rlock__",
	} {
		t.Run(what, func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/jobs"
			node := foreignNode(t, fconn, dir, base)
			m, rw := newLockers(t, prefix)
			r, err := rw.TryRLock(testCtx(t))
			if err != nil {
				t.Fatalf("TryRLock beside a foreign reader: %v", err)
			}
			mustUnlock(t, r)
			wres := lockAsync(testCtx(t), m)
			waitEntries(t, admin, dir, 1)
			notAcquired(t, "writer behind "+node, 300*time.Millisecond, wres)
			if err := fconn.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			w := recv(t, wres, "the lock after the foreign reader's deletion")
			if w.Err != nil {
				t.Fatal(w.Err)
			}
			mustUnlock(t, w.Lease)
			noEphemerals(t, admin, dir)
		})
	}

	// A latch is an election's: locks do not wait for it.
	t.Run("LatchIsNoLock", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		foreignNode(t, fconn, dir, "latch-")
		m, _ := newLockers(t, prefix)
		l, err := m.TryLock(testCtx(t))
		if err != nil {
			t.Fatalf("TryLock beside a LeaderLatch node: %v", err)
		}
		mustUnlock(t, l)
	})

	// A foreign holder's session ends: the waiter gets the lock.
	t.Run("SessionExpires", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		xconn, events := connect(t, ens, 1)
		drain(events)
		foreignNode(t, xconn, dir, kazooHex+"__lock__")
		m, _ := newLockers(t, prefix)
		res := lockAsync(testCtx(t), m)
		waitEntries(t, admin, dir, 1)
		if err := ens.ExpireSession(testCtx(t), xconn); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the lock after the foreign session's expiry")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustUnlock(t, r.Lease)
		noEphemerals(t, admin, dir)
	})

	// A foreign client's ACL that refuses distlock reading its nodes:
	// they are waited for and listed all the same.
	t.Run("ACL", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		mkdirs(t, admin, dir)
		aconn, events := connect(t, ens, 1)
		drain(events)
		if err := aconn.AddAuth("digest", []byte("curator:secret")); err != nil {
			t.Fatal(err)
		}
		node, err := aconn.Create(dir+"/_c_"+curatorUUID+"-lock-", []byte("private"), zk.FlagEphemeral|zk.FlagSequence, zk.DigestACL(zk.PermAll, "curator", "secret"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := admin.Get(node); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("read of the foreign node without its auth: %v, want ErrNoAuth", err)
		}
		m, _ := newLockers(t, prefix)
		res := lockAsync(testCtx(t), m)
		waitEntries(t, admin, dir, 1)
		q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 2 || q[0].Key != node || q[0].Client != distlock.ClientCurator || !q[0].Holding || q[0].Holder != "" || q[0].Token.Seq == 0 {
			t.Fatalf("queue: %+v; want the unreadable Curator node holding, without its data", q)
		}
		notAcquired(t, "behind the unreadable node", 300*time.Millisecond, res)
		if err := aconn.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
		// The servers send no event of a node its watcher may not read:
		// the waiter learns of the deletion from the directory.
		r := recv(t, res, "the lock after the unreadable node's deletion")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustUnlock(t, r.Lease)
	})

	// A foreign release cannot be told from its session's end: a
	// lock-delay is served behind it.
	t.Run("LockDelay", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		node := foreignNode(t, fconn, dir, "_c_"+curatorUUID+"-lock-")
		const delay = 300 * time.Millisecond
		m, _ := newLockers(t, prefix, recipe.WithLockDelay(delay))
		res := lockAsync(testCtx(t), m)
		waitEntries(t, admin, dir, 1)
		if err := fconn.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the lock after Curator's release")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Lease.LockDelay() < delay {
			t.Errorf("lock-delay served: %v, want at least %v", r.Lease.LockDelay(), delay)
		}
		mustUnlock(t, r.Lease)
		noEphemerals(t, admin, dir)
	})

	// Inspect lists foreign entries with their client and the queue's
	// rules, and an unknown client's children apart; an enqueue logs the
	// unknown child, once.
	t.Run("Inspect", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/jobs"
		reader := foreignNode(t, fconn, dir, "_c_"+curatorUUID+"-__READ__")
		unknown := foreignNode(t, fconn, dir, "x-")
		if _, err := fconn.Create(dir+"/not a lock", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		mkdirs(t, fconn, dir+"/sub") // a sub-lock's directory: no entry
		var logs logBuf
		m, rw := newLockers(t, prefix, recipe.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		r := mustLock(t, rw.RLocker()) // beside the foreign reader
		writer := foreignNode(t, fconn, dir, kazooHex+"__lock__")
		wres := lockAsync(testCtx(t), m)
		waitEntries(t, admin, dir, 2)
		q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			key      string
			client   string
			kind     distlock.Kind
			holding  bool
			position int
		}{
			{reader, distlock.ClientCurator, distlock.Shared, true, 1},
			{"", "", distlock.Shared, true, 2},
			{writer, distlock.ClientKazoo, distlock.Exclusive, false, 3},
			{"", "", distlock.Exclusive, false, 4},
			{dir + "/not a lock", distlock.ClientUnknown, distlock.Exclusive, false, 0},
			{unknown, distlock.ClientUnknown, distlock.Exclusive, false, 0},
		}
		if len(q) != len(want) {
			t.Fatalf("queue: %d entries, want %d: %+v", len(q), len(want), q)
		}
		for i, w := range want {
			e := q[i]
			if w.key != "" && e.Key != w.key || e.Client != w.client || e.Kind != w.kind || e.Holding != w.holding || e.Position != w.position {
				t.Errorf("entry %d: %s %s %v holding %v at %d; want %s %q %v holding %v at %d", i, e.Key, e.Client, e.Kind, e.Holding, e.Position, w.key, w.client, w.kind, w.holding, w.position)
			}
		}
		if e := q[0]; e.Holder != "foreign _c_"+curatorUUID+"-__READ__" || e.Token.Owner != uint64(fconn.SessionID()) || e.Token.Seq == 0 || e.Created.IsZero() {
			t.Errorf("Curator's reader: %+v; want its data as Holder, its session and czxid as token", e)
		}
		// The kazoo writer and distlock's reader go: the writer still
		// waits for Curator's reader.
		if err := fconn.Delete(writer, -1); err != nil {
			t.Fatal(err)
		}
		mustUnlock(t, r)
		notAcquired(t, "writer behind Curator's reader", 300*time.Millisecond, wres)
		if err := fconn.Delete(reader, -1); err != nil {
			t.Fatal(err)
		}
		w := recv(t, wres, "the lock after Curator's reader left")
		if w.Err != nil {
			t.Fatal(w.Err)
		}
		mustUnlock(t, w.Lease)
		if err := fconn.Delete(unknown, -1); err != nil {
			t.Fatal(err)
		}
		noEphemerals(t, admin, dir)
		logs.mu.Lock()
		text := logs.b.String()
		logs.mu.Unlock()
		if strings.Count(text, "level=WARN") != 1 || !strings.Contains(text, unknown) && !strings.Contains(text, "not a lock") {
			t.Errorf("logs: %q; want one warning naming an unknown child", text)
		}
	})
}

// logBuf is a log's text, written by the session's goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestForeignElection(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	fconn, events := connect(t, ens, 2)
	drain(events)
	n := 0
	candidate := func(t *testing.T, prefix string) *recipe.Election {
		conn, events := connect(t, ens, n%3)
		n++
		drain(events)
		el, err := recipe.NewElection(newSession(t, conn, recipe.WithPrefix(prefix)), "sched")
		if err != nil {
			t.Fatal(err)
		}
		return el
	}

	// A latch this client may not read holds candidates back too.
	t.Run("ACL", func(t *testing.T) {
		prefix := newPrefix()
		dir := prefix + "/sched"
		mkdirs(t, admin, dir)
		aconn, events := connect(t, ens, 1)
		drain(events)
		if err := aconn.AddAuth("digest", []byte("curator:secret")); err != nil {
			t.Fatal(err)
		}
		node, err := aconn.Create(dir+"/_c_"+curatorUUID+"-latch-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.DigestACL(zk.PermAll, "curator", "secret"))
		if err != nil {
			t.Fatal(err)
		}
		c := candidate(t, prefix)
		rc := locktest.CampaignAsync(testCtx(t), c, "c")
		waitCandidates(t, admin, dir, 1)
		locktest.NotLeading(t, "behind an unreadable latch", 300*time.Millisecond, rc)
		if err := aconn.Delete(node, -1); err != nil {
			t.Fatal(err)
		}
		locktest.MustResign(t, locktest.Leads(t, rc, "c, once the unreadable latch is gone"))
	})

	for what, base := range map[string]string{
		"LeaderLatch":    "latch-",
		"LeaderSelector": "_c_" + curatorUUID + "-lock-",
		"KazooElection":  kazooHex + "__lock__",
	} {
		t.Run(what, func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/sched"
			// One candidate before the foreign one leads; one after it
			// does not lead before the foreign one is gone, even when the
			// term is free.
			a := candidate(t, prefix)
			la := locktest.MustCampaign(t, a, "a")
			b := candidate(t, prefix)
			rb := locktest.CampaignAsync(testCtx(t), b, "b")
			waitCandidates(t, admin, dir, 2)
			node := foreignNode(t, fconn, dir, base)
			c := candidate(t, prefix)
			rc := locktest.CampaignAsync(testCtx(t), c, "c")
			waitCandidates(t, admin, dir, 3)
			locktest.MustResign(t, la)
			lb := locktest.Leads(t, rb, "b, older than the foreign candidate")
			q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), "sched")
			if err != nil {
				t.Fatal(err)
			}
			if e, ok := queueEntry(q, node); !ok || e.Client != distlock.ClientCurator && e.Client != distlock.ClientKazoo || e.Kind != distlock.Candidate || e.Holding || e.Position != 2 {
				t.Errorf("foreign candidate: %+v (listed %v); want a waiting candidate at 2 in %+v", e, ok, q)
			}
			// No handoff to a candidate behind the foreign one: it would
			// lead beside it.
			if _, err := lb.HandOff(testCtx(t), ""); !errors.Is(err, distlock.ErrNoCandidate) || !strings.Contains(err.Error(), path.Base(node)) {
				t.Errorf("HandOff with only a candidate behind the foreign one: %v, want ErrNoCandidate naming %s", err, node)
			}
			if err := lb.Err(); err != nil {
				t.Fatalf("the leader lost with its refused handoff: %v", err)
			}
			locktest.MustResign(t, lb)
			// The term is free, and the foreign candidate is the oldest.
			q, err = mustAdmin(t, admin, prefix).Inspect(testCtx(t), "sched")
			if err != nil {
				t.Fatal(err)
			}
			if e, ok := queueEntry(q, node); !ok || !e.Holding || e.Position != 1 {
				t.Errorf("foreign candidate after the resignations: %+v (listed %v); want it leading", e, ok)
			}
			locktest.NotLeading(t, "behind the foreign candidate", 300*time.Millisecond, rc)
			if err := fconn.Delete(node, -1); err != nil {
				t.Fatal(err)
			}
			lc := locktest.Leads(t, rc, "c, once the foreign candidate is gone")
			locktest.MustResign(t, lc)
			noEphemerals(t, admin, dir)
		})
	}
}
