package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestMultiCreateConnectionLost loses the connection while a multi-lock's
// multi is in flight, on a real 3-server ensemble: the servers' answers
// are held until the multi has been applied (both nodes exist, as another
// connection sees), then the connection is dropped. Lock finds both nodes
// by their GUID and holds with them; a cancelled Lock leaves neither.
func TestMultiCreateConnectionLost(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)

	type lost struct {
		conn *zk.Conn
		s    *zklock.Session
		m    *recipe.MultiMutex
		dirs []string
	}
	lose := func(t *testing.T) *lost {
		t.Helper()
		prefix := newPrefix()
		l := &lost{dirs: []string{prefix + "/a", prefix + "/b"}}
		for _, p := range append([]string{prefix}, l.dirs...) {
			if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatalf("create %s: %v", p, err)
			}
		}
		conn, ev := connect(t, ens)
		drain(ev)
		l.conn = conn
		l.s = newSession(t, conn, recipe.WithPrefix(prefix))
		m, err := recipe.NewMultiMutex(l.s, "b", "a")
		if err != nil {
			t.Fatal(err)
		}
		l.m = m
		release, err := ens.HoldReplies(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		return l
	}
	applied := func(t *testing.T, l *lost) []string {
		t.Helper()
		var nodes []string
		for _, dir := range l.dirs {
			waitEntries(t, admin, dir, 1)
			es := entries(t, admin, dir)
			if len(es) != 1 {
				t.Fatalf("%s: entries %v, want the held multi's only", dir, es)
			}
			nodes = append(nodes, dir+"/"+es[0])
		}
		return nodes
	}

	t.Run("Adopted", func(t *testing.T) {
		l := lose(t)
		res := lockAsync(testCtx(t), l.m)
		nodes := applied(t, l)
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the Lock whose multi's answer was lost")
		if r.Err != nil {
			t.Fatalf("Lock after a connection loss during its multi: %v", r.Err)
		}
		ts := r.Lease.Tokens()
		for i, n := range nodes {
			_, st, err := admin.Exists(n)
			if err != nil || st == nil {
				t.Fatalf("adopted node %s: %v", n, err)
			}
			if st.EphemeralOwner != l.s.ID() || ts[i].Seq != st.Czxid {
				t.Fatalf("node %s: owner %#x czxid %d, token %v: want this session's, with the token's sequence number", n, st.EphemeralOwner, st.Czxid, ts[i])
			}
		}
		mustUnlock(t, r.Lease)
		for _, dir := range l.dirs {
			if es := entries(t, admin, dir); len(es) != 0 {
				t.Fatalf("%s: entries after Unlock: %v", dir, es)
			}
		}
	})

	t.Run("SessionExpired", func(t *testing.T) {
		l := lose(t)
		res := lockAsync(testCtx(t), l.m)
		nodes := applied(t, l)
		_, _, deleted, err := admin.ExistsW(nodes[0])
		if err != nil {
			t.Fatal(err)
		}
		// The session is closed on the servers while the answers are
		// held: the multi's answer never reaches the client.
		expired := make(chan error, 1)
		go func() { expired <- ens.ExpireSession(testCtx(t), l.conn) }()
		if ev := recv(t, deleted, "the expired session's node deleted"); ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on %s: %v", nodes[0], ev)
		}
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, expired, "ExpireSession"); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the Lock whose session expired during its multi")
		if r.Err == nil {
			r.Lease.Unlock(testCtx(t))
			t.Fatal("Lock succeeded although its session expired during the multi")
		}
		if !errors.Is(r.Err, distlock.ErrSessionExpired) {
			t.Fatalf("Lock: %v, want ErrSessionExpired", r.Err)
		}
		for _, dir := range l.dirs {
			waitNoEntries(t, admin, dir, "", 20*time.Second)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		l := lose(t)
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		res := lockAsync(ctx, l.m)
		applied(t, l)
		cancel()
		if r := recv(t, res, "the cancelled Lock"); !errors.Is(r.Err, context.Canceled) {
			if r.Err == nil {
				r.Lease.Unlock(testCtx(t))
			}
			t.Fatalf("Lock: %v, want context.Canceled", r.Err)
		}
		if err := ens.DropConnection(l.conn); err != nil {
			t.Fatal(err)
		}
		for _, dir := range l.dirs {
			waitNoEntries(t, admin, dir, "", 20*time.Second)
		}
		if err := l.s.Err(); err != nil {
			t.Fatalf("session after the drop: %v", err)
		}
	})
}
