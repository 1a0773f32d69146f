package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestContract runs the backend-neutral lock contract (FIFO order among 5
// waiters, TryLock among 5, cancel and deadline while waiting, a waiter's
// or the holder's session expired for real, a middle waiter dying, one
// session, names prefixing each other, double unlock, Do, bad names) on a
// real 3-server ensemble. Each session has a connection of its own, on the
// servers in turn.
func TestContract(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.Run(t, func(t *testing.T) locktest.Backend { return newBackend(t, ens, admin) })
}

func TestMutex(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	session := func(t *testing.T, prefix string) *zklock.Session {
		conn, events := connect(t, ens)
		drain(events)
		return newSession(t, conn, recipe.WithPrefix(prefix))
	}

	t.Run("BadInput", func(t *testing.T) {
		if _, err := recipe.NewMutex(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("NewMutex(nil): %v, want ErrNilClient", err)
		}
		if _, err := zklock.NewSession(testCtx(t), nil); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("NewSession(nil): %v, want ErrNilClient", err)
		}
		s := session(t, newPrefix())
		for _, name := range []string{"", "/a", "a/", "a//b", "a/../b", "a@1", "@w-x", "a b", "ä"} {
			if _, err := recipe.NewMutex(s, name); !errors.Is(err, distlock.ErrInvalidName) {
				t.Errorf("name %q: %v, want ErrInvalidName", name, err)
			}
		}
		if _, err := zklock.NewSession(testCtx(t), admin, zklock.WithSessionTimeout(time.Millisecond)); !errors.Is(err, distlock.ErrTTLTooShort) {
			t.Errorf("session timeout 1ms: %v, want ErrTTLTooShort", err)
		}
		for _, p := range []string{"", "x", "/x/", "/a//b"} {
			if _, err := zklock.NewSession(testCtx(t), admin, recipe.WithPrefix(p)); err == nil {
				t.Errorf("prefix %q accepted", p)
			}
		}
	})

	t.Run("TokenIsCzxid", func(t *testing.T) {
		prefix := newPrefix()
		sess := session(t, prefix)
		m := newMutex(t, sess, "tok")
		l := mustLock(t, m)
		es := entries(t, admin, m.Dir())
		if len(es) != 1 {
			t.Fatalf("entries %v, want 1", es)
		}
		_, st, err := admin.Get(m.Dir() + "/" + es[0])
		if err != nil {
			t.Fatal(err)
		}
		if l.Token().Seq != st.Czxid || l.Token().Name != "tok" {
			t.Fatalf("token %v, want czxid %d", l.Token(), st.Czxid)
		}
		if st.EphemeralOwner != sess.ID() {
			t.Fatalf("ephemeral owner %#x, want %#x", st.EphemeralOwner, sess.ID())
		}
		mustUnlock(t, l)
	})

	t.Run("ForeignChildrenIgnored", func(t *testing.T) {
		prefix := newPrefix()
		m := newMutex(t, session(t, prefix), "foreign")
		dir := m.Dir()
		for _, p := range []string{prefix, dir} {
			if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		// Not entries: a plain child, another marker, a bad GUID, a
		// sub-lock's directory.
		for _, c := range []string{"foreign", "@x-0000000001", "@w-nothex-0000000000", "@w-0123456789abcdef0123456789abcdef-", "sub"} {
			if _, err := admin.Create(dir+"/"+c, []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := m.TryLock(testCtx(t))
		if err != nil {
			t.Fatalf("TryLock with foreign children: %v", err)
		}
		res := lockAsync(testCtx(t), m)
		waitEntries(t, admin, dir, 2)
		mustUnlock(t, l)
		r := recv(t, res, "second Lock")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustUnlock(t, r.Lease)
		// Synced first: the admin connection may be on a server that has
		// not applied the delete yet (ZooKeeper reads are not linearizable).
		if _, err := admin.Sync(dir); err != nil {
			t.Fatal(err)
		}
		children, _, err := admin.Children(dir)
		if err != nil || len(children) != 5 {
			t.Fatalf("children %v (%v), want the 5 foreign ones", children, err)
		}
	})

	t.Run("ParentRecreated", func(t *testing.T) {
		prefix := newPrefix()
		s := session(t, prefix)
		m := newMutex(t, s, "re")
		prev := distlock.Token{Name: "re"}
		for i := range 3 {
			l := mustLock(t, m)
			es := entries(t, admin, m.Dir())
			if len(es) != 1 || !strings.HasSuffix(es[0], "-0000000000") {
				t.Fatalf("round %d: entries %v, want one with sequence 0 (a new directory)", i, es)
			}
			if !l.Token().Newer(prev) {
				t.Fatalf("round %d: token %v not newer than %v", i, l.Token(), prev)
			}
			prev = l.Token()
			mustUnlock(t, l)
			if err := admin.Delete(m.Dir(), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				t.Fatal(err)
			}
		}
	})

	t.Run("EntryDeleted", func(t *testing.T) {
		prefix := newPrefix()
		m := newMutex(t, session(t, prefix), "del")
		holder := mustLock(t, m)
		wm := newMutex(t, session(t, prefix), "del")
		res := lockAsync(testCtx(t), wm)
		waitEntries(t, admin, m.Dir(), 2)
		es := entries(t, admin, m.Dir())
		// The waiter's node deleted by someone else: its Lock fails, never
		// acquires, and the holder is untouched.
		if err := admin.Delete(m.Dir()+"/"+es[1], -1); err != nil {
			t.Fatal(err)
		}
		if r := recv(t, res, "the waiter's Lock"); !errors.Is(r.Err, distlock.ErrEntryGone) {
			t.Fatalf("Lock with its node deleted: %v, want ErrEntryGone", r.Err)
		}
		if holder.Err() != nil {
			t.Fatalf("holder: %v", holder.Err())
		}
		// The holder's node deleted: the lease is lost.
		if err := admin.Delete(m.Dir()+"/"+es[0], -1); err != nil {
			t.Fatal(err)
		}
		recv(t, holder.Done(), "the holder's Done")
		if err := holder.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrEntryGone) {
			t.Fatalf("holder Err %v, want ErrLost and ErrEntryGone", err)
		}
		if err := holder.Unlock(testCtx(t)); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("Unlock of a lost lock: %v", err)
		}
		mustUnlock(t, mustLock(t, wm))
		if es := entries(t, admin, m.Dir()); len(es) != 0 {
			t.Fatalf("entries left: %v", es)
		}
	})

	// A waiter marks its node once nothing older than its predecessor is
	// left: the data becomes the holder value, a NUL and the predecessor's
	// name, and the version 1 (see zklock's doc).
	// A holder releases with set-data + delete in one transaction, so its
	// successor's data watch says "released" (whether the holder waited
	// or not: lock-delay tells a release from a node gone otherwise); a
	// waiter that gives up only deletes its node (see zklock's doc).
	t.Run("ReleaseIsADataChange", func(t *testing.T) {
		prefix := newPrefix()
		m := newMutex(t, session(t, prefix), "rel")
		l := mustLock(t, m)
		ctx, cancel := context.WithCancel(testCtx(t))
		quitter := lockAsync(ctx, newMutex(t, session(t, prefix), "rel"))
		waitEntries(t, admin, m.Dir(), 2)
		waiter := lockAsync(testCtx(t), newMutex(t, session(t, prefix), "rel"))
		waitEntries(t, admin, m.Dir(), 3)
		es := entries(t, admin, m.Dir())
		watch := func(child string) <-chan zk.Event {
			_, _, ch, err := admin.GetW(m.Dir() + "/" + child)
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
		expect := func(ch <-chan zk.Event, want zk.EventType, what string) {
			t.Helper()
			if ev := recv(t, ch, what); ev.Type != want {
				t.Fatalf("%s: %v, want %v", what, ev.Type, want)
			}
		}
		qch := watch(es[1])
		cancel()
		if r := recv(t, quitter, "the cancelled Lock"); !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v", r.Err)
		}
		expect(qch, zk.EventNodeDeleted, "a waiter that gave up")
		hch := watch(es[0])
		mustUnlock(t, l)
		expect(hch, zk.EventNodeDataChanged, "the release of a holder that never waited")
		r := recv(t, waiter, "the waiter's Lock")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		wch := watch(es[2])
		mustUnlock(t, r.Lease)
		expect(wch, zk.EventNodeDataChanged, "the release of a holder that waited")
		if es := entries(t, admin, m.Dir()); len(es) != 0 {
			t.Fatalf("entries left: %v", es)
		}
	})

	// Waiters that give up in front of another are stepped over: one by one
	// (a small read each), and past two gone ones with one listing.
	t.Run("CancelledWaitersSkipped", func(t *testing.T) {
		prefix := newPrefix()
		holder := mustLock(t, newMutex(t, session(t, prefix), "skip"))
		var cancels []context.CancelFunc
		var quitters []<-chan result
		m := newMutex(t, session(t, prefix), "skip")
		for i := range 3 {
			ctx, cancel := context.WithCancel(testCtx(t))
			cancels = append(cancels, cancel)
			quitters = append(quitters, lockAsync(ctx, newMutex(t, session(t, prefix), "skip")))
			waitEntries(t, admin, m.Dir(), i+2)
		}
		last := lockAsync(testCtx(t), m)
		waitEntries(t, admin, m.Dir(), 5)
		// The oldest two first (the last waiter does not watch them), then
		// its predecessor: it checks two gone entries, then lists.
		for _, i := range []int{0, 1, 2} {
			cancels[i]()
			if r := recv(t, quitters[i], "a cancelled waiter"); !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("cancelled waiter %d: %v", i, r.Err)
			}
		}
		if es := entries(t, admin, m.Dir()); len(es) != 2 {
			t.Fatalf("entries %v, want the holder's and the last waiter's", es)
		}
		select {
		case r := <-last:
			t.Fatalf("the last waiter returned (err %v) while the lock is held", r.Err)
		default:
		}
		mustUnlock(t, holder)
		r := recv(t, last, "the last waiter")
		if r.Err != nil || !r.Lease.Token().Newer(holder.Token()) {
			t.Fatalf("last waiter: %v (token %v after %v)", r.Err, r.Lease, holder.Token())
		}
		mustUnlock(t, r.Lease)
	})

	t.Run("TryLockLosesWithoutWriting", func(t *testing.T) {
		prefix := newPrefix()
		m := newMutex(t, session(t, prefix), "try")
		l := mustLock(t, m)
		_, st, err := admin.Get(m.Dir())
		if err != nil {
			t.Fatal(err)
		}
		_, err = newMutex(t, session(t, prefix), "try").TryLock(testCtx(t))
		if !errors.Is(err, distlock.ErrLocked) || !strings.Contains(err.Error(), m.Dir()+"/@w-") {
			t.Fatalf("TryLock while held: %v, want ErrLocked naming the holder's node", err)
		}
		// No child was created and deleted: the directory's child version
		// is where it was.
		if _, err := admin.Sync(m.Dir()); err != nil {
			t.Fatal(err)
		}
		_, st2, err := admin.Get(m.Dir())
		if err != nil {
			t.Fatal(err)
		}
		if st2.Cversion != st.Cversion {
			t.Fatalf("the directory's cversion went from %d to %d: the losing TryLock wrote", st.Cversion, st2.Cversion)
		}
		mustUnlock(t, l)
	})

	t.Run("CloseWhileHeld", func(t *testing.T) {
		s := session(t, newPrefix())
		m := newMutex(t, s, "closed")
		l := mustLock(t, m)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		recv(t, l.Done(), "the lease's Done")
		if err := l.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionClosed) {
			t.Fatalf("lease Err %v, want ErrLost and ErrSessionClosed", err)
		}
		if !errors.Is(s.Err(), distlock.ErrSessionClosed) {
			t.Fatalf("session Err %v", s.Err())
		}
		if es := entries(t, admin, m.Dir()); len(es) != 0 {
			t.Fatalf("Close left entries: %v", es)
		}
		if err := l.Unlock(testCtx(t)); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("Unlock after Close: %v, want ErrLost", err)
		}
		if _, err := m.TryLock(testCtx(t)); !errors.Is(err, distlock.ErrSessionClosed) {
			t.Fatalf("TryLock on a closed session: %v", err)
		}
	})
}

// TestDeadlineSweep runs the contract's deadline sweep (a Lock cut off
// at every point of its enqueue leaves nothing behind) on a real 3-server ensemble: Locks of every kind cut off at every point
// of their enqueue leave nothing behind.
func TestDeadlineSweep(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.DeadlineSweep(t, newBackend(t, ens, admin), locktest.SweepConfig{})
}
