package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestCreateConnectionLost loses the connection while a Lock's create is
// in flight, on a real 3-server ensemble: the servers' answers to the
// locking client are held (integration's HoldReplies) until the create
// has been applied, as another connection sees, and then the connection
// is dropped or the session expired, so that the answer never arrives.
func TestCreateConnectionLost(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)

	// lose sets up a lock whose directory exists (a create into a missing
	// directory is answered NoNode, which the hold would keep too), and
	// starts holding its client's answers.
	type lost struct {
		conn    *zk.Conn
		s       *zklock.Session
		m       *recipe.Mutex
		dir     string
		release func()
	}
	lose := func(t *testing.T, name string) *lost {
		t.Helper()
		prefix := newPrefix()
		for _, p := range []string{prefix, prefix + "/" + name} {
			if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatalf("create %s: %v", p, err)
			}
		}
		conn, ev := connect(t, ens)
		drain(ev)
		s := newSession(t, conn, recipe.WithPrefix(prefix))
		l := &lost{conn: conn, s: s, m: newMutex(t, s, name), dir: prefix + "/" + name}
		release, err := ens.HoldReplies(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		l.release = release
		return l
	}
	// applied waits, on a watch from the admin connection, until the held
	// create has been applied, and returns the node's name.
	applied := func(t *testing.T, l *lost) string {
		t.Helper()
		waitEntries(t, admin, l.dir, 1)
		es := entries(t, admin, l.dir)
		if len(es) != 1 {
			t.Fatalf("entries %v, want the held create's only", es)
		}
		return es[0]
	}

	t.Run("Adopted", func(t *testing.T) {
		l := lose(t, "adopt")
		res := lockAsync(testCtx(t), l.m)
		node := applied(t, l)
		select {
		case r := <-res:
			t.Fatalf("Lock returned (err %v) while its create's answer was held", r.Err)
		default:
		}
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the Lock whose create's answer was lost")
		if r.Err != nil {
			t.Fatalf("Lock after a connection loss during its create: %v", r.Err)
		}
		if l.conn.SessionID() != l.s.ID() || l.s.Err() != nil {
			t.Fatalf("session %#x (err %v), want %#x alive", l.conn.SessionID(), l.s.Err(), l.s.ID())
		}
		es := entries(t, admin, l.dir)
		if len(es) != 1 || es[0] != node {
			t.Fatalf("entries %v, want the adopted %s only", es, node)
		}
		ok, st, err := admin.Exists(l.dir + "/" + node)
		if err != nil || !ok {
			t.Fatalf("adopted node: exists %v, %v", ok, err)
		}
		if st.EphemeralOwner != l.s.ID() {
			t.Fatalf("adopted node owned by %#x, want %#x", st.EphemeralOwner, l.s.ID())
		}
		if tok := r.Lease.Token(); tok.Seq != st.Czxid {
			t.Fatalf("token %v, want the adopted node's czxid %d", tok, st.Czxid)
		}
		mustUnlock(t, r.Lease)
		if es := entries(t, admin, l.dir); len(es) != 0 {
			t.Fatalf("entries after Unlock: %v", es)
		}
	})

	t.Run("SessionExpired", func(t *testing.T) {
		l := lose(t, "expire")
		res := lockAsync(testCtx(t), l.m)
		node := applied(t, l)
		guid := entryGUID(node)
		ok, _, deleted, err := admin.ExistsW(l.dir + "/" + node)
		if err != nil || !ok {
			t.Fatalf("watch %s: exists %v, %v", node, ok, err)
		}
		// The session is closed on the servers while the answers are held:
		// the create's answer, already sent, never reaches the client.
		// ExpireSession returns once the client reports the expiry, which
		// it learns on a new connection: drop the held one when the node
		// has gone with the session.
		expired := make(chan error, 1)
		go func() { expired <- ens.ExpireSession(testCtx(t), l.conn) }()
		if ev := recv(t, deleted, "the expired session's node deleted"); ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on %s: %v", node, ev)
		}
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, expired, "ExpireSession"); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the Lock whose session expired during its create")
		if r.Err == nil {
			r.Lease.Unlock(testCtx(t))
			t.Fatal("Lock succeeded although its session expired during the create")
		}
		if !errors.Is(r.Err, distlock.ErrSessionExpired) {
			t.Fatalf("Lock: %v, want ErrSessionExpired", r.Err)
		}
		// Nothing of this Lock remains: not the node of the expired
		// session, nor one the connection's next session made for it.
		waitNoEntries(t, admin, l.dir, guid, 20*time.Second)
		waitNoEntries(t, admin, l.dir, "", 20*time.Second)
	})

	t.Run("Cancelled", func(t *testing.T) {
		l := lose(t, "cancel")
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		res := lockAsync(ctx, l.m)
		applied(t, l)
		start := time.Now()
		cancel()
		r := recv(t, res, "the cancelled Lock")
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Lock returned %v after its context was cancelled", took)
		}
		if r.Err == nil {
			r.Lease.Unlock(testCtx(t))
			t.Fatal("Lock succeeded after its context was cancelled")
		}
		if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("Lock: %v, want context.Canceled", r.Err)
		}
		// The create's answer is lost with the connection; the cleanup
		// finds the node by its GUID once the client is back.
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		waitNoEntries(t, admin, l.dir, "", 20*time.Second)
		if err := l.s.Err(); err != nil {
			t.Fatalf("session after the drop: %v", err)
		}
	})
}

// entryGUID returns the GUID in a lock entry's name "@w-<guid>-<seq>".
func entryGUID(child string) string { return child[3 : 3+32] }

// waitNoEntries waits, on watches of conn, until dir holds no lock entry
// with guid (any entry when guid is ""), and fails the test if some remain
// after within.
func waitNoEntries(t *testing.T, conn *zk.Conn, dir, guid string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), within)
	defer cancel()
	for {
		children, _, ch, err := conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("watch %s: %v", dir, err)
		}
		var left []string
		for _, c := range children {
			if isEntry(c) && (guid == "" || strings.Contains(c, guid)) {
				left = append(left, c)
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s still holds %v after %v", dir, left, within)
		}
	}
}
